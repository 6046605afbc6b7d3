use super::*;

use std::sync::mpsc::Sender as Tx;

/// A relay whose thread answers request n with n, after waiting for a go from `gate`.
fn gated() -> (Relay<u32>, Tx<()>) {
    let (go, gate) = std::sync::mpsc::channel::<()>();
    let relay = Relay::spawn("relay-test".into(), move |jobs, answers| {
        let mut n = 0;
        while jobs.recv().is_ok() {
            n += 1;
            if gate.recv().is_err() {
                return;
            }
            if answers.send(n).is_err() {
                return;
            }
        }
    })
    .expect("thread");
    (relay, go)
}

fn soon() -> Instant {
    Instant::now() + Duration::from_millis(50)
}

#[test]
fn an_answer_in_time_is_collected() {
    let (mut r, go) = gated();
    assert!(matches!(r.request(false), Before::Settled));
    go.send(()).unwrap();
    assert_eq!(r.collect(Instant::now() + Duration::from_secs(5)), Some(1));
}

#[test]
fn a_stuck_request_is_not_asked_again_nor_waited_for_and_its_late_answer_is_handed_back() {
    let (mut r, go) = gated();
    r.request(false);
    assert_eq!(r.collect(soon()), None, "late");
    assert!(matches!(r.request(false), Before::StillOut));
    let started = Instant::now();
    assert_eq!(r.collect(Instant::now() + Duration::from_secs(5)), None);
    assert!(
        started.elapsed() < Duration::from_secs(1),
        "an overdue request is not waited for again"
    );
    go.send(()).unwrap();
    let until = Instant::now() + Duration::from_secs(5);
    let late = loop {
        match r.request(false) {
            Before::Late(n) => break n,
            _ if Instant::now() > until => panic!("the late answer never came"),
            _ => std::thread::sleep(Duration::from_millis(5)),
        }
    };
    assert_eq!(late, 1);
    go.send(()).unwrap();
    assert_eq!(
        r.collect(Instant::now() + Duration::from_secs(5)),
        Some(2),
        "a fresh request is waited for again"
    );
}

use super::*;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Instant;

// The gate is process-wide; these tests share it, so they run under one lock of their own.
static SERIAL: Mutex<()> = Mutex::new(());

#[test]
fn calls_never_overlap() {
    let _t = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let inside = Arc::new(AtomicUsize::new(0));
    let overlapped = Arc::new(AtomicBool::new(false));
    std::thread::scope(|s| {
        for _ in 0..4 {
            let inside = inside.clone();
            let overlapped = overlapped.clone();
            s.spawn(move || {
                for _ in 0..200 {
                    serialized(Duration::from_secs(5), || {
                        if inside.fetch_add(1, Ordering::SeqCst) > 0 {
                            overlapped.store(true, Ordering::SeqCst);
                        }
                        std::thread::yield_now();
                        inside.fetch_sub(1, Ordering::SeqCst);
                    })
                    .expect("the gate opens within 5 s");
                }
            });
        }
    });
    assert!(!overlapped.load(Ordering::SeqCst));
}

#[test]
fn a_stuck_holder_costs_others_a_bounded_wait_not_a_hang() {
    let _t = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let (release, stuck) = std::sync::mpsc::channel::<()>();
    let (entered, inside) = std::sync::mpsc::channel::<()>();
    let holder = std::thread::spawn(move || {
        serialized(Duration::from_secs(5), || {
            let _ = entered.send(());
            let _ = stuck.recv();
        })
    });
    inside.recv().expect("the holder entered");
    let started = Instant::now();
    assert!(serialized(Duration::from_millis(50), || ()).is_none());
    assert!(started.elapsed() < Duration::from_secs(2));
    let _ = release.send(());
    assert!(holder.join().expect("holder").is_some());
    assert!(serialized(Duration::from_millis(50), || ()).is_some());
}

#[test]
fn a_panicking_call_opens_the_gate_again() {
    let _t = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let r = std::panic::catch_unwind(|| serialized(GATE_WAIT, || panic!("inside NVML")));
    assert!(r.is_err());
    assert!(serialized(Duration::from_millis(50), || ()).is_some());
}

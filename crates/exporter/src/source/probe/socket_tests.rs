use super::super::{tests::frame, RECORDS_OFF_AFTER};
use super::*;
use tokio::net::UnixStream;

#[tokio::test]
async fn the_kernel_names_the_sender() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("probe.sock");
    let book = ProbeBook::new(Duration::from_secs(5));
    let task = spawn_receiver(&path, book.clone()).unwrap();
    let mut c = UnixStream::connect(&path).await.unwrap();
    c.write_all(&frame(100, 1).encode()).await.unwrap();
    c.write_all(&frame(900, 9).encode()).await.unwrap();
    // Garbage ends the conversation without touching what was recorded.
    c.write_all(&[0xff; HEADER_LEN]).await.unwrap();
    let me = std::process::id();
    for _ in 0..100 {
        let r = book.readings(&[me], Instant::now());
        if r.get(&me).is_some_and(|r| r.kernels == 9) && book.refused()["malformed"] == 1 {
            task.abort();
            return;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    panic!(
        "no report recorded for pid {me}, or the garbage not counted: {:?}",
        book.refused()
    );
}

/// The next control message the probe side reads, within a few seconds.
async fn next_control(c: &mut UnixStream) -> Control {
    let mut msg = [0u8; tessera_probe::wire::CONTROL_LEN];
    tokio::time::timeout(Duration::from_secs(5), c.read_exact(&mut msg))
        .await
        .expect("a control message in time")
        .expect("read");
    Control::decode(&msg).expect("a well-formed control message")
}

#[tokio::test]
async fn the_probe_is_told_when_its_device_becomes_shared_and_when_alone_again() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("probe.sock");
    let book = ProbeBook::new(Duration::from_secs(5));
    let task = spawn_receiver(&path, book.clone()).unwrap();
    let mut c = UnixStream::connect(&path).await.unwrap();
    c.write_all(&frame(100, 1).encode()).await.unwrap();
    let me = std::process::id();
    let t0 = Instant::now();
    // Alone, and another process shared: nothing is sent to this one.
    book.set_shared(&[me + 1].into_iter().collect(), t0);
    let mut byte = [0u8; 1];
    assert!(
        tokio::time::timeout(Duration::from_millis(300), c.read(&mut byte))
            .await
            .is_err(),
        "a process alone was sent something"
    );
    book.set_shared(&[me].into_iter().collect(), t0);
    assert_eq!(next_control(&mut c).await, Control { shared: true });
    book.set_shared(&Default::default(), t0 + RECORDS_OFF_AFTER);
    assert_eq!(next_control(&mut c).await, Control { shared: false });
    task.abort();
}

#[tokio::test]
async fn only_a_stale_socket_is_replaced() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("probe.sock");
    std::fs::write(&path, b"not a socket").unwrap();
    let e = spawn_receiver(&path, ProbeBook::new(Duration::from_secs(5)))
        .map(|_| ())
        .unwrap_err();
    assert!(e.to_string().contains("not a socket"), "{e}");
    assert_eq!(std::fs::read(&path).unwrap(), b"not a socket");
    std::fs::remove_file(&path).unwrap();
    let first = spawn_receiver(&path, ProbeBook::new(Duration::from_secs(5))).unwrap();
    // A live listener is never taken over.
    let e = spawn_receiver(&path, ProbeBook::new(Duration::from_secs(5)))
        .map(|_| ())
        .unwrap_err();
    assert!(e.to_string().contains("another process"), "{e}");
    first.abort();
    // Give the aborted task a moment to drop its listener.
    for _ in 0..100 {
        if std::os::unix::net::UnixStream::connect(&path).is_err() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    // A socket left behind by an earlier run is replaced.
    spawn_receiver(&path, ProbeBook::new(Duration::from_secs(5)))
        .unwrap()
        .abort();
}

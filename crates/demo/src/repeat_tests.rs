use super::*;
use std::sync::atomic::AtomicUsize;

#[test]
fn steps_until_dropped() {
    let count = Arc::new(AtomicUsize::new(0));
    let c = count.clone();
    let r = Repeating::start("test-repeat", Duration::from_millis(5), move |_| {
        c.fetch_add(1, Ordering::Relaxed);
    })
    .unwrap();
    while count.load(Ordering::Relaxed) < 3 {
        std::thread::sleep(Duration::from_millis(5));
    }
    drop(r);
    let after = count.load(Ordering::Relaxed);
    std::thread::sleep(Duration::from_millis(30));
    assert_eq!(count.load(Ordering::Relaxed), after, "no step after drop");
}

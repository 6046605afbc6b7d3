use super::*;

#[test]
fn learns_unsupported_once_and_counts_failures() {
    let mut l = CallLedger::default();
    let mut asked = 0;
    for _ in 0..3 {
        let _ = l.call("gpu0", "power", || {
            asked += 1;
            Err::<u32, _>(NvmlError::NotSupported)
        });
    }
    assert_eq!(asked, 1);
    assert!(l.errors().is_empty());
    assert!(!l.cycle_failed());

    let _ = l.call("gpu0", "temp", || Err::<u32, _>(NvmlError::Unknown));
    let _ = l.call("gpu1", "temp", || Err::<u32, _>(NvmlError::GpuLost));
    assert_eq!(l.errors().get("temp"), Some(&2));
    assert!(l.is_lost("gpu1") && !l.is_lost("gpu0"));
    assert!(l.cycle_failed());
    l.begin_cycle();
    assert!(!l.is_lost("gpu1") && !l.cycle_failed());
    assert_eq!(l.errors().get("temp"), Some(&2), "counters are cumulative");
}

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

#[test]
fn each_call_made_is_counted_with_its_cpu_and_wall_time() {
    let mut l = CallLedger::default();
    let spin = || {
        let until = Instant::now() + std::time::Duration::from_millis(20);
        let mut n = 0u64;
        while Instant::now() < until {
            n = n.wrapping_add(1);
        }
        Ok::<u64, NvmlError>(n)
    };
    let _ = l.call("gpu0", "busy", spin);
    let _ = l.call("gpu0", "busy", spin);
    let _ = l.call("gpu0", "asleep", || {
        std::thread::sleep(std::time::Duration::from_millis(20));
        Ok::<(), NvmlError>(())
    });
    let _ = l.call("gpu0", "unsupported", || {
        Err::<(), _>(NvmlError::NotSupported)
    });
    let _ = l.call("gpu0", "unsupported", || {
        Err::<(), _>(NvmlError::NotSupported)
    });
    let busy = l.costs()["busy"];
    assert_eq!(busy.calls, 2);
    assert!(busy.wall_ns >= 40_000_000, "{busy:?}");
    assert!(busy.cpu_ns > 0, "a spinning call burns CPU: {busy:?}");
    let asleep = l.costs()["asleep"];
    assert!(
        asleep.cpu_ns < asleep.wall_ns / 2,
        "a call that waits costs time, not CPU: {asleep:?}"
    );
    assert_eq!(
        l.costs()["unsupported"].calls,
        1,
        "a call learned unsupported is not made again"
    );
}

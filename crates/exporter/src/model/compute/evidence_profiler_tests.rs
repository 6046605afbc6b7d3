//! A tenant whose own profiler holds CUPTI: its probe sees none of its kernels, and says so.
//! Nobody's share may rest on that silence: not its own, not its co-tenants' (split against
//! its timeline), not the difference its co-tenants' claims would leave it.

use std::collections::HashMap;

use super::*;
use crate::model::compute::{profiler_why, split, ActivityInputs, ProbeReading};
use crate::model::testkit::compute_process as proc;
use crate::model::ProcessSample;

fn pod(name: &str) -> PodRef {
    PodRef {
        namespace: "ml".into(),
        pod: name.into(),
        container: "c".into(),
        ..Default::default()
    }
}

fn busy(b: f64) -> ProbeReading {
    ProbeReading {
        busy_ratio: Some(b),
        busy_seconds: 10.0,
        kernels: 100,
        window_kernels: Some(50),
        ..Default::default()
    }
}

/// What the probe book gives a process whose probe reports a profiler.
fn profiled() -> ProbeReading {
    ProbeReading {
        busy_seconds: 4.0,
        kernels: 40,
        profiler: true,
        ..Default::default()
    }
}

/// Splits and reviews a device of processes `(pid, NVML booking, pod, probe reading)`, each
/// spending CPU.
fn run(device: f64, mps: bool, procs: &[(u32, Option<f64>, &str, ProbeReading)]) -> DeviceSplit {
    let samples: Vec<ProcessSample> = procs.iter().map(|(pid, sm, ..)| proc(*pid, *sm)).collect();
    let refs: Vec<&ProcessSample> = samples.iter().collect();
    let owners: Vec<(u32, PodRef)> = procs.iter().map(|(pid, _, p, _)| (*pid, pod(p))).collect();
    let mut act = ActivityInputs::default();
    for (pid, _, _, r) in procs {
        act.cpu_cores.insert(*pid, 0.5);
        act.probe.insert(*pid, *r);
    }
    let d = DeviceCompute {
        processes: &refs,
        device_activity: Some(device),
        mps,
        mig_instance: false,
        activity: &act,
        now: 0.0,
        idle_since: None,
        recent_activity: &[],
    };
    let mut s = split(&d);
    let owners: HashMap<u32, &PodRef> = owners.iter().map(|(p, o)| (*p, o)).collect();
    review(&mut s, &d, &owners);
    s
}

#[test]
fn a_profiled_tenant_withholds_its_share_and_every_co_tenants_under_time_slicing_and_mps() {
    for mps in [false, true] {
        let s = run(
            0.8,
            mps,
            &[(1, None, "a", profiled()), (2, None, "b", busy(0.3))],
        );
        assert_eq!(s.method, SplitMethod::Withheld, "mps {mps}: {s:?}");
        assert_eq!(s.profiler, vec![1]);
        assert!(s.why.starts_with("profiler"), "{}", s.why);
        assert_eq!(s.why, profiler_why(&[1]));
        for pid in [1, 2] {
            assert_eq!(s.share_of(pid).share, None, "pid {pid}");
            assert_eq!(s.share_of(pid).busy_ratio, None, "pid {pid}");
        }
        assert!(s.wide.is_none(), "{s:?}");
        assert!(s.disputed.is_empty(), "{s:?}");
    }
}

/// Beside an unprobed tenant, by difference it would get what the probed ones leave, its
/// co-tenant's claim read as if the profiled process ran nothing beside it; and a probe that
/// says why it measures nothing is not a silent one, to be disputed.
#[test]
fn a_profiled_tenant_leaves_no_difference_to_give() {
    let samples = [proc(1, None), proc(2, None), proc(3, None)];
    let refs: Vec<&ProcessSample> = samples.iter().collect();
    let mut act = ActivityInputs::default();
    for pid in [1, 2, 3] {
        act.cpu_cores.insert(pid, 0.5);
    }
    act.probe.insert(1, profiled());
    act.probe.insert(2, busy(0.3));
    let d = DeviceCompute {
        processes: &refs,
        device_activity: Some(0.8),
        mps: false,
        mig_instance: false,
        activity: &act,
        now: 0.0,
        idle_since: None,
        recent_activity: &[],
    };
    let owners = [(1, pod("a")), (2, pod("b")), (3, pod("c"))];
    let owners: HashMap<u32, &PodRef> = owners.iter().map(|(p, o)| (*p, o)).collect();
    let mut s = split(&d);
    review(&mut s, &d, &owners);
    assert_eq!(s.method, SplitMethod::Withheld, "{s:?}");
    assert!(s.why.starts_with("profiler"), "{}", s.why);
    assert!(s.wide.is_none() && s.disputed.is_empty(), "{s:?}");
}

/// Alone, or beside processes of its own pod only, NVML's figure or the pod's reading needs no
/// probe: those still stand.
#[test]
fn a_profiled_tenant_alone_or_within_one_pod_keeps_what_needs_no_probe() {
    let s = run(0.6, false, &[(1, Some(0.6), "a", profiled())]);
    assert_eq!(s.method, SplitMethod::SoleActiveProcess);
    assert_eq!(s.share_of(1).share, Some(0.6));
    let s = run(
        0.6,
        false,
        &[(1, None, "a", profiled()), (2, None, "a", busy(0.2))],
    );
    assert_eq!(s.method, SplitMethod::SoleActiveContainer);
    assert!(s
        .wide
        .as_ref()
        .is_some_and(|w| (w.share - 0.6).abs() < 1e-9));
}

/// A process whose probe lost its records, using no CPU and booked nothing by NVML, is quiet
/// as one without a probe would be; it is no reason to withhold a busy co-tenant's share.
#[test]
fn a_quiet_profiled_process_is_quiet() {
    let samples = [proc(1, None), proc(2, Some(0.4))];
    let refs: Vec<&ProcessSample> = samples.iter().collect();
    let mut act = ActivityInputs::default();
    act.cpu_cores.insert(1, 0.0);
    act.cpu_cores.insert(2, 0.5);
    act.probe.insert(1, profiled());
    let d = DeviceCompute {
        processes: &refs,
        device_activity: Some(0.4),
        mps: false,
        mig_instance: false,
        activity: &act,
        now: 0.0,
        idle_since: None,
        recent_activity: &[],
    };
    let s = split(&d);
    assert_eq!(s.quiet, vec![1]);
    assert!(s.profiler.is_empty());
    assert_eq!(s.method, SplitMethod::SoleActiveProcess);
}

/// A probe that found no CUPTI in its process: withheld like a profiled one, with its reason.
#[test]
fn a_tenant_whose_probe_found_no_cupti_withholds_the_split_with_that_reason() {
    let blind = ProbeReading {
        no_cupti: true,
        ..Default::default()
    };
    let s = run(
        0.8,
        false,
        &[(1, None, "a", blind), (2, None, "b", busy(0.3))],
    );
    assert_eq!(s.method, SplitMethod::Withheld, "{s:?}");
    assert_eq!(s.no_cupti, vec![1]);
    assert_eq!(s.why, crate::model::compute::no_cupti_why(&[1]));
    assert!(s.why.starts_with("no-cupti"), "{}", s.why);
    assert!(s.wide.is_none(), "no figure by difference: {s:?}");
    for pid in [1, 2] {
        assert!(
            s.shares.get(&pid).is_none_or(|p| p.share.is_none()),
            "{s:?}"
        );
    }
    // One pod's processes: the device's reading is still that pod's.
    let s = run(
        0.8,
        false,
        &[(1, None, "a", blind), (2, None, "a", busy(0.3))],
    );
    assert!(s.wide.is_some(), "{s:?}");
}

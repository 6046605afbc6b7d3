//! Idle only on evidence that covers the window: NVML's device utilization is a snapshot of
//! the last ~167 ms on an H100, so a process alone running long kernels at a low duty cycle
//! reads 0 whenever a snapshot falls between two of them.

use super::*;
use crate::model::testkit::compute_process;

fn alone(pid: u32) -> ProcessSample {
    compute_process(pid, Some(0.0))
}

/// One process launching kernels (its CPU is busy), read once a second with a 5 s window.
fn busy_cpu() -> ActivityInputs {
    ActivityInputs {
        cpu_cores: [(1, 0.3)].into_iter().collect(),
        window_seconds: 5.0,
        timeline_lag_seconds: 0.0,
        ..ActivityInputs::default()
    }
}

/// Splits the device at each (time, reading), carrying the idle run as the join does.
fn readings(act: &ActivityInputs, mig: bool, seq: &[(f64, f64)]) -> Vec<DeviceSplit> {
    let procs = [alone(1)];
    let refs: Vec<&ProcessSample> = procs.iter().collect();
    let mut idle_since = None;
    let mut recent = Vec::new();
    seq.iter()
        .map(|&(now, device)| {
            let s = split(&DeviceCompute {
                processes: &refs,
                device_activity: Some(device),
                mps: false,
                mig_instance: mig,
                activity: act,
                now,
                idle_since,
                recent_activity: &recent,
            });
            idle_since = s.idle_since;
            recent = s.recent_activity.clone();
            s
        })
        .collect()
}

#[test]
fn the_claims_are_weighed_against_the_devices_mean_over_the_window() {
    // Seen on the H100 corpus: a bursty tenant's second read 0.35 between seconds of
    // 0.02–0.08; the probes' claims cover five seconds, and so must the figure they are held to.
    let act = busy_cpu();
    let s = readings(
        &act,
        false,
        &[
            (1.0, 0.02),
            (2.0, 0.08),
            (3.0, 0.04),
            (4.0, 0.06),
            (5.0, 0.35),
            (6.0, 0.05),
        ],
    );
    let mean = |v: &[f64]| v.iter().sum::<f64>() / v.len() as f64;
    assert_eq!(s[0].device_window, Some(0.02));
    assert!((s[4].device_window.unwrap() - mean(&[0.02, 0.08, 0.04, 0.06, 0.35])).abs() < 1e-12);
    // A reading as old as the window has left it.
    assert!((s[5].device_window.unwrap() - mean(&[0.08, 0.04, 0.06, 0.35, 0.05])).abs() < 1e-12);
    assert_eq!(s[5].recent_activity.len(), 5);
    // The device's own reading stays the second's.
    assert_eq!(s[4].device_activity, Some(0.35));
    // A clock stepped back forgets what it can no longer place.
    let s = readings(&act, false, &[(10.0, 0.5), (3.0, 0.1)]);
    assert_eq!(s[1].device_window, Some(0.1));
}

fn verdict(s: &DeviceSplit) -> Activity {
    container_activity(s, &[1], s.share_of(1).share)
}

#[test]
fn a_process_alone_is_not_idle_on_a_snapshot_between_its_kernels() {
    // The shape of the suite's alone-long30 case: 30 % duty, gaps between kernels longer than
    // NVML's snapshot, so a few reads in a row can read 0 while the process runs all along.
    let seq = [
        (0.0, 0.42),
        (1.0, 0.0),
        (2.0, 0.35),
        (3.0, 0.0),
        (4.0, 0.0),
        (5.0, 0.0),
    ];
    for (s, (now, _)) in readings(&busy_cpu(), false, &seq).iter().zip(seq) {
        assert_ne!(s.method, SplitMethod::Idle, "at {now} s: {}", s.why);
        assert_ne!(verdict(s), Activity::Idle, "at {now} s: {}", s.why);
    }
    let s = &readings(&busy_cpu(), false, &seq)[1];
    assert_eq!(s.method, SplitMethod::SoleActiveProcess);
    assert_eq!(
        s.share_of(1).share,
        Some(0.0),
        "the reading itself is still published"
    );
    assert_eq!(verdict(s), Activity::Unknown);
}

#[test]
fn a_device_that_read_idle_over_the_window_makes_its_process_idle() {
    // A process that holds memory and spins a core, launching nothing: idle once the device
    // has read idle over 0.8 of the window, as the CPU history must span it.
    let seq = [
        (0.0, 0.4),
        (1.0, 0.0),
        (2.0, 0.0),
        (3.0, 0.0),
        (4.0, 0.0),
        (5.0, 0.0),
    ];
    let s = readings(&busy_cpu(), false, &seq);
    assert!(s[..5].iter().all(|s| s.method != SplitMethod::Idle));
    assert_eq!(s[5].method, SplitMethod::Idle, "{}", s[5].why);
    assert_eq!(verdict(&s[5]), Activity::Idle);
    assert_eq!(s[5].idle_since, Some(1.0));
    // A busy reading ends the run; the next idle one starts another.
    let seq = [(0.0, 0.0), (4.0, 0.0), (5.0, 0.2), (6.0, 0.0)];
    let s = readings(&busy_cpu(), false, &seq);
    assert_eq!(s[1].method, SplitMethod::Idle);
    assert_eq!(s[2].idle_since, None);
    assert_eq!(s[3].idle_since, Some(6.0));
    assert_eq!(verdict(&s[3]), Activity::Unknown);
}

#[test]
fn a_clock_stepped_back_restarts_the_run_instead_of_holding_it() {
    let seq = [(100.0, 0.0), (10.0, 0.0), (14.0, 0.0)];
    let s = readings(&busy_cpu(), false, &seq);
    assert_eq!(s[1].idle_since, Some(10.0));
    assert_eq!(s[2].method, SplitMethod::Idle);
}

#[test]
fn a_mig_instances_gpm_reading_covers_the_interval_and_decides_at_once() {
    let s = readings(&busy_cpu(), true, &[(0.0, 0.4), (1.0, 0.0)]);
    assert_eq!(s[1].method, SplitMethod::Idle);
}

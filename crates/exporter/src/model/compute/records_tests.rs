use super::*;
use crate::model::compute::ProbeReading;
use crate::model::GpuSample;

fn proc(pid: u32, mig: Option<&str>, nvml: Option<f64>) -> ProcessSample {
    ProcessSample {
        pid,
        name: format!("p{pid}"),
        kind: None,
        memory_used_bytes: Some(1 << 30),
        sm_utilization: nvml,
        memory_utilization: None,
        mig_uuid: mig.map(str::to_string),
    }
}

fn sample(gpus: Vec<Vec<ProcessSample>>) -> NvmlSample {
    NvmlSample {
        gpus: gpus
            .into_iter()
            .map(|processes| GpuSample {
                processes,
                ..GpuSample::default()
            })
            .collect(),
        ..NvmlSample::default()
    }
}

fn cpu(pairs: &[(u32, f64)]) -> ActivityInputs {
    ActivityInputs {
        cpu_cores: pairs.iter().copied().collect(),
        ..ActivityInputs::default()
    }
}

fn sorted(s: HashSet<u32>) -> Vec<u32> {
    let mut v: Vec<u32> = s.into_iter().collect();
    v.sort_unstable();
    v
}

#[test]
fn a_process_alone_on_its_device_never_needs_records() {
    let s = sample(vec![
        vec![proc(1, None, Some(0.9))],
        vec![proc(2, None, None)],
    ]);
    assert!(shared_processes(&s, &cpu(&[(1, 1.0), (2, 1.0)])).is_empty());
}

#[test]
fn two_candidates_on_one_gpu_both_need_records_and_a_quiet_one_does_not_count() {
    // 3 holds memory and sleeps: quiet, so 1 stays alone.
    let s = sample(vec![vec![proc(1, None, Some(0.5)), proc(3, None, None)]]);
    let quiet3 = cpu(&[(1, 1.0), (3, 0.0)]);
    assert!(shared_processes(&s, &quiet3).is_empty());
    // 3 spins a CPU core: it may run kernels, and only the probes can tell.
    assert_eq!(
        sorted(shared_processes(&s, &cpu(&[(1, 1.0), (3, 1.0)]))),
        [1, 3]
    );
    // CPU time not known yet (a process first seen this cycle): a candidate.
    assert_eq!(sorted(shared_processes(&s, &cpu(&[(1, 1.0)]))), [1, 3]);
    // Kernels the probe saw make a candidate, whatever NVML and the CPU say.
    let mut a = quiet3;
    a.probe.insert(
        3,
        ProbeReading {
            busy_ratio: Some(0.2),
            ..ProbeReading::default()
        },
    );
    assert_eq!(sorted(shared_processes(&s, &a)), [1, 3]);
}

#[test]
fn a_quiet_process_beside_two_candidates_keeps_its_records() {
    // Seen on the H100 corpus: an idle tenant polling for work crossed the quiet mark now
    // and then; with its records off it had no reading when it did, and the device's split
    // was withheld.
    let s = sample(vec![vec![
        proc(1, None, Some(0.5)),
        proc(2, None, Some(0.3)),
        proc(3, None, None),
    ]]);
    let a = cpu(&[(1, 1.0), (2, 1.0), (3, 0.0)]);
    assert_eq!(sorted(shared_processes(&s, &a)), [1, 2, 3]);
    // Beside one candidate it stays off: that one is alone, NVML's figure is its own.
    let s = sample(vec![vec![proc(1, None, Some(0.5)), proc(3, None, None)]]);
    assert!(shared_processes(&s, &cpu(&[(1, 1.0), (3, 0.0)])).is_empty());
}

#[test]
fn a_probe_that_saw_no_kernels_does_not_turn_its_own_records_off() {
    let s = sample(vec![vec![proc(1, None, Some(0.5)), proc(3, None, None)]]);
    let mut a = cpu(&[(1, 1.0), (3, 1.0)]);
    a.probe.insert(
        3,
        ProbeReading {
            busy_ratio: Some(0.0),
            ..ProbeReading::default()
        },
    );
    assert_eq!(sorted(shared_processes(&s, &a)), [1, 3]);
}

#[test]
fn mig_instances_are_devices_of_their_own_and_the_mps_server_is_no_tenant() {
    let mut server = proc(9, None, Some(0.6));
    server.kind = Some(ProcessKind::MpsServer);
    let s = sample(vec![
        vec![proc(1, Some("MIG-a"), None), proc(2, Some("MIG-b"), None)],
        vec![server, proc(5, None, None)],
        vec![proc(6, Some("MIG-c"), None), proc(7, Some("MIG-c"), None)],
    ]);
    let a = cpu(&[(1, 1.0), (2, 1.0), (5, 1.0), (6, 1.0), (7, 1.0), (9, 1.0)]);
    assert_eq!(sorted(shared_processes(&s, &a)), [6, 7]);
}

#[test]
fn a_process_on_two_gpus_needs_records_if_either_is_shared() {
    let s = sample(vec![
        vec![proc(1, None, None)],
        vec![proc(1, None, None), proc(2, None, None)],
    ]);
    assert_eq!(
        sorted(shared_processes(&s, &cpu(&[(1, 1.0), (2, 1.0)]))),
        [1, 2]
    );
}

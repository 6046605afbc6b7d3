//! Tests that each need their own scenario, run one at a time in this
//! process: each inits NVML with its scenario and shuts it down again, which
//! resets the fake (its state lives from the first init to the last shutdown).

mod common;

use common::{init, scenario, serial, write_scenario, MIB};
use nvml_wrapper::bitmasks::device::ThrottleReasons;
use nvml_wrapper::bitmasks::event::EventTypes;
use nvml_wrapper::enum_wrappers::device::{PcieUtilCounter, TemperatureSensor};
use nvml_wrapper::enums::event::XidError;
use nvml_wrapper::error::NvmlError;
use nvml_wrapper_sys::bindings::*;
use std::time::{Duration, Instant};

type CountFn = unsafe extern "C" fn(*mut u32) -> nvmlReturn_t;
type VoidFn = unsafe extern "C" fn() -> nvmlReturn_t;

#[test]
fn lifecycle_and_reference_counting() {
    let _g = serial();
    // SAFETY: our own library; the symbols have these signatures.
    let lib = unsafe { libloading::Library::new(common::lib_path()) }.unwrap();
    let (count, init_fn, shutdown) = unsafe {
        (
            *lib.get::<CountFn>(b"nvmlDeviceGetCount_v2").unwrap(),
            *lib.get::<VoidFn>(b"nvmlInit_v2").unwrap(),
            *lib.get::<VoidFn>(b"nvmlShutdown").unwrap(),
        )
    };
    let mut n = 0;
    unsafe {
        assert_eq!(count(&mut n), 1, "UNINITIALIZED before init");
        assert_eq!(shutdown(), 1);
        std::env::remove_var(common::SCENARIO_ENV);
        assert_eq!(init_fn(), 999, "no scenario: UNKNOWN");
        std::env::set_var(common::SCENARIO_ENV, "/nonexistent/scenario.yaml");
        assert_eq!(init_fn(), 999);
        std::env::set_var(common::SCENARIO_ENV, scenario("mig.yaml"));
        assert_eq!(init_fn(), 0);
        assert_eq!(init_fn(), 0);
        assert_eq!(shutdown(), 0);
        assert_eq!(
            count(std::ptr::null_mut()),
            2,
            "null pointer: INVALID_ARGUMENT"
        );
        assert_eq!(count(&mut n), 0, "still initialized once");
        assert_eq!(n, 2);
        assert_eq!(shutdown(), 0);
        assert_eq!(count(&mut n), 1, "UNINITIALIZED after the last shutdown");
    }
}

#[test]
fn invalid_scenarios_fail_init() {
    let _g = serial();
    let cases = [
        ("unknown-sku", "gpus: [{ sku: h200-141gb }]"),
        ("typo", "gpus: [{ sku: h100-80gb-hbm3, compute_mod: default }]"),
        (
            "overlap",
            "gpus: [{ sku: h100-80gb-hbm3, mig: { instances: [ { profile: 3g.40gb, placement: 0 }, { profile: 2g.20gb, placement: 2 } ] } }]",
        ),
        (
            "bad-placement",
            "gpus: [{ sku: h100-80gb-hbm3, mig: { instances: [ { profile: 3g.40gb, placement: 2 } ] } }]",
        ),
        (
            "wrong-profile",
            "gpus: [{ sku: a100-sxm4-40gb, mig: { instances: [ { profile: 1g.10gb+me } ] } }]",
        ),
        (
            "missing-gpu",
            "gpus: [{ sku: h100-80gb-hbm3 }]\nphases: [{ at_ms: 0, processes: [{ pid: 1, gpu: 1 }] }]",
        ),
        (
            "missing-instance",
            "gpus: [{ sku: h100-80gb-hbm3, mig: { instances: [ { profile: 1g.10gb } ] } }]\nphases: [{ at_ms: 0, processes: [{ pid: 1, gpu: 0, mig_instance: 1 }] }]",
        ),
        (
            "no-instance",
            "gpus: [{ sku: h100-80gb-hbm3, mig: { instances: [ { profile: 1g.10gb } ] } }]\nphases: [{ at_ms: 0, processes: [{ pid: 1, gpu: 0 }] }]",
        ),
        (
            "too-much-memory",
            "gpus: [{ sku: h100-80gb-hbm3 }]\nphases: [{ at_ms: 0, processes: [{ pid: 1, gpu: 0, memory_mib: 90000 }] }]",
        ),
        (
            "phase-order",
            "gpus: [{ sku: h100-80gb-hbm3 }]\nphases: [{ at_ms: 0 }, { at_ms: 500 }, { at_ms: 200 }]",
        ),
        (
            "fault-call",
            "gpus: [{ sku: h100-80gb-hbm3 }]\nfaults: [{ call: nvmlDeviceGetPower, error: unknown }]",
        ),
        ("stride", "process_struct_stride: 20\ngpus: [{ sku: h100-80gb-hbm3 }]"),
        ("not-yaml", "gpus: [ {"),
    ];
    for (name, yaml) in cases {
        let path = write_scenario(name, yaml);
        match init(&path) {
            Err(NvmlError::Unknown) => {}
            other => panic!("{name}: expected init to fail with Unknown, got {other:?}"),
        }
    }
}

const TWO_PROCS: &str = "
gpus: [{ sku: h100-80gb-hbm3, mig: { instances: [ { profile: 3g.40gb } ] } }]
phases:
  - at_ms: 0
    processes:
      - { pid: 111, gpu: 0, mig_instance: 0, memory_mib: 100 }
      - { pid: 222, gpu: 0, mig_instance: 0, memory_mib: 200 }
";

/// (pid, used memory, (GPU instance id, compute instance id) when the stride has them)
type RawEntry = (u32, u64, Option<(u32, u32)>);

/// Reads entries at `stride` from a raw compute-process call.
fn raw_entries(nvml: &nvml_wrapper::Nvml, stride: usize) -> Vec<RawEntry> {
    let dev = nvml.device_by_index(0).unwrap();
    let f = nvml
        .lib()
        .nvmlDeviceGetComputeRunningProcesses_v3
        .as_ref()
        .unwrap();
    let mut buf = vec![0u8; 10 * 24];
    let mut count = 10u32;
    let r = unsafe {
        f(
            dev.handle(),
            &mut count,
            buf.as_mut_ptr() as *mut nvmlProcessInfo_t,
        )
    };
    assert_eq!(r, 0);
    (0..count as usize)
        .map(|i| {
            let e = &buf[i * stride..];
            let u32_at = |o: usize| u32::from_ne_bytes(e[o..o + 4].try_into().unwrap());
            let mem = u64::from_ne_bytes(e[8..16].try_into().unwrap());
            let ids = (stride >= 24).then(|| (u32_at(16), u32_at(20)));
            (u32_at(0), mem, ids)
        })
        .collect()
}

#[test]
fn process_struct_stride_emulation() {
    let _g = serial();
    for stride in [16usize, 24, 32] {
        let yaml = format!("process_struct_stride: {stride}\n{TWO_PROCS}");
        let nvml = init(&write_scenario(&format!("stride{stride}"), &yaml)).unwrap();
        let entries = raw_entries(&nvml, stride);
        let ids = (stride >= 24).then_some((1, 0));
        assert_eq!(
            entries,
            [(111, 100 * MIB, ids), (222, 200 * MIB, ids)],
            "stride {stride}"
        );

        // nvml-wrapper assumes 24 bytes: other strides garble the second entry.
        let seen: Vec<u32> = nvml
            .device_by_index(0)
            .unwrap()
            .running_compute_processes()
            .unwrap()
            .iter()
            .map(|p| p.pid)
            .collect();
        assert_eq!(seen[0], 111);
        assert_eq!(seen[1] == 222, stride == 24, "stride {stride}: {seen:?}");
        nvml.shutdown().unwrap();
    }
}

#[test]
fn slow_calls_and_injected_errors() {
    let _g = serial();
    let yaml = "
gpus: [{ sku: h100-80gb-hbm3 }, { sku: h100-80gb-hbm3 }]
faults:
  - { call: nvmlDeviceGetTemperature, gpu: 0, slow_ms: 300 }
  - { call: '*', gpu: 1, error: no_permission }
phases:
  - at_ms: 0
    processes: [{ pid: 7, gpu: 0, memory_mib: 10, sm_util: 5 }]
  - at_ms: 300
    processes: [{ pid: 7, gpu: 0, memory_mib: 10, sm_util: 5 }]
    faults:
      - { call: nvmlDeviceGetComputeRunningProcesses, error: timeout }
";
    let started = Instant::now();
    let nvml = init(&write_scenario("faults", yaml)).unwrap();
    let gpu0 = nvml.device_by_index(0).unwrap();
    if started.elapsed() < Duration::from_millis(200) {
        assert_eq!(gpu0.running_compute_processes().unwrap().len(), 1);
    }

    let t = Instant::now();
    assert!(gpu0.power_usage().is_ok());
    assert!(t.elapsed() < Duration::from_millis(100));
    let t = Instant::now();
    assert!(gpu0.temperature(TemperatureSensor::Gpu).is_ok());
    assert!(t.elapsed() >= Duration::from_millis(300));

    // "*" hits every call about GPU 1, including getting its handle.
    assert!(matches!(
        nvml.device_by_index(1),
        Err(NvmlError::NoPermission)
    ));
    assert_eq!(nvml.device_count().unwrap(), 2);

    // The phase fault (given by base name) applies from 300 ms on.
    assert!(started.elapsed() >= Duration::from_millis(300));
    assert!(matches!(
        gpu0.running_compute_processes(),
        Err(NvmlError::Timeout)
    ));
    nvml.shutdown().unwrap();

    let yaml =
        "gpus: [{ sku: h100-80gb-hbm3 }]\nfaults: [{ call: nvmlInit, error: driver_not_loaded }]";
    assert!(matches!(
        init(&write_scenario("init-fault", yaml)),
        Err(NvmlError::DriverNotLoaded)
    ));
}

#[test]
fn xids_recur_on_every_loop() {
    let _g = serial();
    let yaml = "
repeat_after_ms: 200
gpus: [{ sku: h100-80gb-hbm3 }]
phases:
  - { at_ms: 0 }
  - { at_ms: 100, xids: [{ gpu: 0, xid: 48 }, { gpu: 0, xid: 63 }] }
";
    let nvml = init(&write_scenario("loop", yaml)).unwrap();
    let dev = nvml.device_by_index(0).unwrap();
    let set = nvml.create_event_set().unwrap();
    let set = dev
        .register_events(EventTypes::CRITICAL_XID_ERROR, set)
        .unwrap();
    let mut seen = Vec::new();
    let t = Instant::now();
    while seen.len() < 4 && t.elapsed() < Duration::from_secs(5) {
        if let Ok(e) = set.wait(100) {
            seen.push(e.event_data);
        }
    }
    // Both XIDs of the phase, in order, once per loop.
    let (a, b) = (Some(XidError::Value(48)), Some(XidError::Value(63)));
    assert_eq!(seen, [a.clone(), b.clone(), a, b]);
    assert!(t.elapsed() >= Duration::from_millis(200));
    drop(set);
    nvml.shutdown().unwrap();
}

#[test]
fn realistic_latency() {
    let _g = serial();
    let yaml = "realistic_latency: true\ngpus: [{ sku: h100-80gb-hbm3 }]";
    let nvml = init(&write_scenario("latency", yaml)).unwrap();
    let dev = nvml.device_by_index(0).unwrap();
    let t = Instant::now();
    dev.pcie_throughput(PcieUtilCounter::Send).unwrap();
    assert!(t.elapsed() >= Duration::from_millis(20));
    let t = Instant::now();
    dev.total_energy_consumption().unwrap();
    assert!(t.elapsed() >= Duration::from_millis(3));
    nvml.shutdown().unwrap();
}

#[test]
fn processes_churn_over_time() {
    let _g = serial();
    let started = Instant::now();
    let nvml = init(&scenario("churn.yaml")).unwrap();
    let pids = |i| -> Vec<u32> {
        let dev = nvml.device_by_index(i).unwrap();
        dev.running_compute_processes()
            .unwrap()
            .iter()
            .map(|p| p.pid)
            .collect()
    };
    if started.elapsed() < Duration::from_millis(200) {
        assert_eq!(pids(0), [5101, 5102]);
        assert_eq!(pids(1), [5201]);
        let util = nvml
            .device_by_index(0)
            .unwrap()
            .utilization_rates()
            .unwrap();
        assert_eq!(util.gpu, 50);
    }
    std::thread::sleep(Duration::from_millis(350).saturating_sub(started.elapsed()));
    assert_eq!(pids(0), [5102, 5103]);
    assert_eq!(pids(1), [5202]);
    assert_eq!(
        nvml.device_by_index(0)
            .unwrap()
            .utilization_rates()
            .unwrap()
            .gpu,
        70
    );
    nvml.shutdown().unwrap();
}

#[test]
fn a100_node() {
    let _g = serial();
    let nvml = init(&scenario("a100-mixed.yaml")).unwrap();
    let names: Vec<String> = (0..3)
        .map(|i| nvml.device_by_index(i).unwrap().name().unwrap())
        .collect();
    assert_eq!(
        names,
        [
            "NVIDIA A100-SXM4-80GB",
            "NVIDIA A100-SXM4-80GB",
            "NVIDIA A100-SXM4-40GB"
        ]
    );
    for i in 0..3 {
        let dev = nvml.device_by_index(i).unwrap();
        assert!(!dev.gpm_support().unwrap());
        assert!(matches!(dev.gpm_sample(), Err(NvmlError::NotSupported)));
        assert_eq!(dev.enforced_power_limit().unwrap(), 400_000);
    }
    let gpu0 = nvml.device_by_index(0).unwrap();
    assert_eq!(gpu0.memory_info().unwrap().total, 81920 * MIB);
    let first = gpu0.mig_device_by_index(0).unwrap();
    assert_eq!(first.name().unwrap(), "NVIDIA A100-SXM4-80GB MIG 4g.40gb");
    assert_eq!(first.attributes().unwrap().multiprocessor_count, 56);

    let gpu2 = nvml.device_by_index(2).unwrap();
    assert_eq!(gpu2.memory_info().unwrap().total, 40960 * MIB);
    let migs: Vec<_> = (0..7)
        .map(|i| gpu2.mig_device_by_index(i).unwrap())
        .collect();
    assert_eq!(migs[6].name().unwrap(), "NVIDIA A100-SXM4-40GB MIG 1g.5gb");
    assert_eq!(migs[3].running_compute_processes().unwrap()[0].pid, 6302);
    let p = gpu2
        .profile_info(NVML_GPU_INSTANCE_PROFILE_1_SLICE)
        .unwrap();
    assert_eq!(
        (p.id, p.memory_size_mb, p.multiprocessor_count),
        (19, 4864, 14)
    );
    nvml.shutdown().unwrap();
}

#[test]
fn demo_node() {
    let _g = serial();
    let nvml = init(&scenario("demo.yaml")).unwrap();
    assert_eq!(nvml.device_count().unwrap(), 9);
    let dev = |i| nvml.device_by_index(i).unwrap();

    // GPUs 0-1: exclusive training, 60-75 GiB.
    for i in 0..2 {
        let used = dev(i).memory_info().unwrap().used / MIB;
        assert!(
            (60 * 1024..75 * 1024).contains(&used),
            "GPU {i}: {used} MiB"
        );
        assert_eq!(dev(i).running_compute_processes().unwrap().len(), 1);
    }
    // GPU 2: three instances; GPU 3: seven.
    assert_eq!(dev(2).mig_mode().unwrap().current, 1);
    let n_mig = |i| {
        (0..7)
            .filter(|&m| dev(i).mig_device_by_index(m).is_ok())
            .count()
    };
    assert_eq!((n_mig(2), n_mig(3)), (3, 7));
    // GPU 4: time-sliced, per-process SM adds up to the device's utilization.
    let sm: u32 = dev(4)
        .process_utilization_stats(None)
        .unwrap()
        .iter()
        .map(|s| s.sm_util)
        .sum();
    assert_eq!(sm, dev(4).utilization_rates().unwrap().gpu);
    // GPU 5: MPS server in the compute list only.
    assert_eq!(dev(5).running_compute_processes().unwrap().len(), 4);
    assert_eq!(dev(5).mps_running_compute_processes().unwrap().len(), 3);
    // GPU 6: 30 GiB held at 0 %: no utilization samples at all.
    assert!(dev(6).memory_info().unwrap().used >= 30 * 1024 * MIB);
    assert_eq!(dev(6).utilization_rates().unwrap().gpu, 0);
    assert!(matches!(
        dev(6).process_utilization_stats(None),
        Err(NvmlError::NotFound)
    ));
    assert!(dev(6)
        .current_throttle_reasons()
        .unwrap()
        .contains(ThrottleReasons::GPU_IDLE));
    // GPU 1 is a vGPU guest.
    assert_eq!(
        dev(1).virtualization_mode().unwrap(),
        nvml_wrapper::enum_wrappers::device::GpuVirtualizationMode::Vgpu
    );
    // GPU 7: two HAMi tenants, time-sliced: the driver books the whole device to one of them.
    assert_eq!(dev(7).running_compute_processes().unwrap().len(), 2);
    assert_eq!(
        dev(7).process_utilization_stats(None).unwrap().len(),
        1,
        "one booked sample"
    );
    // GPU 8: MPS under a DRA claim, server plus two clients, as on GPU 5.
    assert_eq!(dev(8).running_compute_processes().unwrap().len(), 3);
    assert_eq!(dev(8).mps_running_compute_processes().unwrap().len(), 2);
    nvml.shutdown().unwrap();
}

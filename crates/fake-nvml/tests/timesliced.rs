//! A single time-sliced H100 (scenarios/timesliced.yaml): device identity,
//! memory, telemetry, processes, per-process utilization and GPM, read
//! through nvml-wrapper exactly as the exporter reads them.

mod common;

use common::{shared, MIB};
use nvml_wrapper::enum_wrappers::device::{
    Clock, ComputeMode, EccCounter, GpuVirtualizationMode, MemoryError, PcieUtilCounter, Sampling,
    TemperatureSensor,
};
use nvml_wrapper::enums::device::UsedGpuMemory;
use nvml_wrapper::enums::gpm::GpmMetricId;
use nvml_wrapper::error::NvmlError;
use nvml_wrapper::gpm::gpm_metrics_get;
use nvml_wrapper::Nvml;
use std::time::Duration;

fn nvml() -> &'static Nvml {
    shared("timesliced.yaml")
}

#[test]
fn exports_every_promised_symbol() {
    let names = common::exported_symbols();
    assert_eq!(names.len(), 57);
    // SAFETY: loading our own library; only symbol addresses are looked up.
    let lib = unsafe { libloading::Library::new(common::lib_path()) }.unwrap();
    for name in names {
        let sym: Result<libloading::Symbol<unsafe extern "C" fn()>, _> =
            unsafe { lib.get(name.as_bytes()) };
        assert!(sym.is_ok(), "{name} is not exported");
    }
}

#[test]
fn system_queries() {
    let nvml = nvml();
    assert_eq!(nvml.sys_driver_version().unwrap(), "580.159.04");
    assert_eq!(nvml.sys_nvml_version().unwrap(), "13.580.159.04");
    assert_eq!(nvml.sys_cuda_driver_version().unwrap(), 13000);
    assert_eq!(nvml.device_count().unwrap(), 1);
    assert!(matches!(
        nvml.device_by_index(1),
        Err(NvmlError::InvalidArg)
    ));
}

#[test]
fn error_strings_are_static() {
    let f = nvml().lib().nvmlErrorString.as_ref().unwrap();
    let text = |code| {
        unsafe { std::ffi::CStr::from_ptr(f(code)) }
            .to_str()
            .unwrap()
    };
    assert_eq!(text(15), "GPU is lost");
    assert_eq!(text(6), "Not Found");
    assert_eq!(text(12345), "Unknown Error");
}

#[test]
fn device_identity() {
    let nvml = nvml();
    let dev = nvml.device_by_index(0).unwrap();
    assert_eq!(dev.name().unwrap(), "NVIDIA H100 80GB HBM3");
    let uuid = dev.uuid().unwrap();
    assert_eq!(uuid, "GPU-ae19043d-ef40-d753-6928-d875dd5f2b07");
    assert_eq!(dev.index().unwrap(), 0);
    assert_eq!(dev.minor_number().unwrap(), 0);
    let pci = dev.pci_info().unwrap();
    assert_eq!(pci.bus_id, "00000000:00:06.0");
    assert_eq!((pci.domain, pci.bus, pci.device), (0, 0, 6));
    assert_eq!(pci.pci_device_id, 0x2330_10DE);
    assert_eq!(pci.pci_sub_system_id, Some(0x16C1_10DE));
    assert_eq!(dev.compute_mode().unwrap(), ComputeMode::Default);
    assert_eq!(
        dev.virtualization_mode().unwrap(),
        GpuVirtualizationMode::PassThrough
    );
    assert!(dev.is_ecc_enabled().unwrap().currently_enabled);
    let mig = dev.mig_mode().unwrap();
    assert_eq!((mig.current, mig.pending), (0, 0));
    assert_eq!(dev.mig_device_count().unwrap(), 0);
    assert!(!dev.mig_is_mig_device_handle().unwrap());
    assert!(matches!(
        dev.mig_device_by_index(0),
        Err(NvmlError::NotSupported)
    ));
    // Full GPUs are not MIG devices.
    assert!(matches!(dev.attributes(), Err(NvmlError::NotSupported)));
    assert!(matches!(
        dev.mig_parent_device(),
        Err(NvmlError::InvalidArg)
    ));

    let again = nvml.device_by_uuid(uuid.as_str()).unwrap();
    assert_eq!(again.index().unwrap(), 0);
    assert!(matches!(
        nvml.device_by_uuid("GPU-00000000-0000-0000-0000-000000000000"),
        Err(NvmlError::NotFound)
    ));
}

#[test]
fn memory_v2_and_v1() {
    let dev = nvml().device_by_index(0).unwrap();
    let m = dev.memory_info().unwrap();
    assert_eq!(m.total, 81559 * MIB);
    assert_eq!(m.reserved, 480 * MIB);
    assert_eq!(m.used, 1635 * MIB);
    assert_eq!(m.free, m.total - m.reserved - m.used);

    // v1 has no `reserved`; the driver folds it into `used`.
    let f = nvml().lib().nvmlDeviceGetMemoryInfo.as_ref().unwrap();
    let mut v1 = nvml_wrapper_sys::bindings::nvmlMemory_t {
        total: 0,
        free: 0,
        used: 0,
    };
    assert_eq!(unsafe { f(dev.handle(), &mut v1) }, 0);
    assert_eq!(v1.used, (1635 + 480) * MIB);
    assert_eq!(v1.free, m.free);

    // A v2 struct with the wrong version is refused, as nvml.h versions demand.
    let f2 = nvml().lib().nvmlDeviceGetMemoryInfo_v2.as_ref().unwrap();
    let mut v2: nvml_wrapper_sys::bindings::nvmlMemory_v2_t = unsafe { std::mem::zeroed() };
    assert_eq!(unsafe { f2(dev.handle(), &mut v2) }, 25);
    // Null out-pointers are invalid arguments.
    assert_eq!(unsafe { f2(dev.handle(), std::ptr::null_mut()) }, 2);
}

#[test]
fn telemetry() {
    let dev = nvml().device_by_index(0).unwrap();
    let u = dev.utilization_rates().unwrap();
    assert_eq!((u.gpu, u.memory), (37, 1));
    assert_eq!(dev.power_usage().unwrap(), 325_000);
    assert_eq!(dev.enforced_power_limit().unwrap(), 700_000);
    assert_eq!(dev.temperature(TemperatureSensor::Gpu).unwrap(), 54);
    assert_eq!(dev.clock_info(Clock::SM).unwrap(), 1980);
    assert_eq!(dev.clock_info(Clock::Memory).unwrap(), 2619);
    assert!(dev.current_throttle_reasons().unwrap().is_empty());
    let f = nvml()
        .lib()
        .nvmlDeviceGetCurrentClocksEventReasons
        .as_ref()
        .unwrap();
    let mut reasons = u64::MAX;
    assert_eq!(unsafe { f(dev.handle(), &mut reasons) }, 0);
    assert_eq!(reasons, 0);
    assert_eq!(
        dev.total_ecc_errors(MemoryError::Corrected, EccCounter::Volatile)
            .unwrap(),
        0
    );
    assert_eq!(
        dev.total_ecc_errors(MemoryError::Uncorrected, EccCounter::Aggregate)
            .unwrap(),
        0
    );
    assert_eq!(dev.pcie_replay_counter().unwrap(), 0);
    assert!(dev.pcie_throughput(PcieUtilCounter::Send).unwrap() > 0);
    assert!(dev.pcie_throughput(PcieUtilCounter::Receive).unwrap() > 0);
}

#[test]
fn energy_integrates_power() {
    let dev = nvml().device_by_index(0).unwrap();
    let e1 = dev.total_energy_consumption().unwrap();
    let t = std::time::Instant::now();
    std::thread::sleep(Duration::from_millis(200));
    let e2 = dev.total_energy_consumption().unwrap();
    let elapsed = t.elapsed().as_secs_f64();
    // 325 W for `elapsed` seconds, in millijoules.
    let expected = 325.0 * elapsed * 1000.0;
    let delta = (e2 - e1) as f64;
    assert!(
        (delta - expected).abs() < 0.1 * expected + 2000.0,
        "energy grew {delta} mJ, expected about {expected}"
    );
}

#[test]
fn processes() {
    let dev = nvml().device_by_index(0).unwrap();
    let mut procs = dev.running_compute_processes().unwrap();
    procs.sort_by_key(|p| p.pid);
    assert_eq!(procs.iter().map(|p| p.pid).collect::<Vec<_>>(), [458, 459]);
    for p in &procs {
        assert_eq!(p.used_gpu_memory, UsedGpuMemory::Used(810 * MIB));
        // No MIG: the driver reports 0xFFFFFFFF, which nvml-wrapper maps to None.
        assert_eq!((p.gpu_instance_id, p.compute_instance_id), (None, None));
    }
    assert_eq!(dev.running_compute_processes_count().unwrap(), 2);
    assert!(dev.running_graphics_processes().unwrap().is_empty());
    assert!(dev.mps_running_compute_processes().unwrap().is_empty());
}

#[test]
fn process_utilization_samples() {
    let dev = nvml().device_by_index(0).unwrap();
    let mut samples = dev.process_utilization_stats(None).unwrap();
    samples.sort_by_key(|s| s.pid);
    assert_eq!(
        samples
            .iter()
            .map(|s| (s.pid, s.sm_util, s.mem_util))
            .collect::<Vec<_>>(),
        // Two time-sliced processes: the driver books the device's 37 % to one of them.
        [(459, 37, 1)]
    );
    let newest = samples.iter().map(|s| s.timestamp).max().unwrap();
    // Wall-clock µs, like the driver's stamps.
    let now_us = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_micros() as u64;
    assert!(newest <= now_us + 1000 && newest + 10_000_000 > now_us);

    // Reading again from the newest stamp yields fresh samples...
    let again = dev.process_utilization_stats(newest).unwrap();
    assert_eq!(again.len(), 1);
    assert!(again.iter().all(|s| s.timestamp > newest));
    // ...and nothing newer than a future stamp is NOT_FOUND ("no new samples").
    assert!(matches!(
        dev.process_utilization_stats(now_us + 3_600_000_000),
        Err(NvmlError::NotFound)
    ));
}

#[test]
fn gpm_metrics() {
    let nvml = nvml();
    let dev = nvml.device_by_index(0).unwrap();
    assert!(dev.gpm_support().unwrap());
    let s1 = dev.gpm_sample().unwrap();
    std::thread::sleep(Duration::from_millis(50));
    let s2 = dev.gpm_sample().unwrap();
    let ids = [
        GpmMetricId::GraphicsUtil,
        GpmMetricId::SmUtil,
        GpmMetricId::SmOccupancy,
        GpmMetricId::AnyTensorUtil,
        GpmMetricId::DramBwUtil,
        GpmMetricId::Fp32Util,
        GpmMetricId::Fp64Util,
        GpmMetricId::NvlinkTotalRxPerSec,
    ];
    let results = gpm_metrics_get(nvml, &s1, &s2, &ids).unwrap();
    let values: Vec<f64> = results.iter().map(|r| r.as_ref().unwrap().value).collect();
    let expected = [37.0, 35.2, 4.6, 0.0, 0.9, 27.5, 0.0, 0.0];
    for ((id, got), want) in ids.iter().zip(&values).zip(expected) {
        assert!((got - want).abs() < 1e-6, "{id:?}: {got} != {want}");
    }
    let sm = results[1].as_ref().unwrap();
    assert_eq!(sm.metric_info.unit, "%");
    assert!(!sm.metric_info.short_name.is_empty());
}

#[test]
fn utilization_samples_come_every_200ms_and_only_newer_than_asked() {
    let d = nvml().device_by_index(0).unwrap();
    std::thread::sleep(Duration::from_millis(450));
    let all = d.samples(Sampling::GpuUtilization, None).unwrap();
    assert!(all.len() >= 2, "{all:?}");
    assert!(all
        .windows(2)
        .all(|w| w[1].timestamp - w[0].timestamp == 200_000));
    let newest = all.last().unwrap().timestamp;
    match d.samples(Sampling::GpuUtilization, newest) {
        Err(NvmlError::NotFound) => {}
        Ok(newer) => assert!(newer.iter().all(|s| s.timestamp > newest), "{newer:?}"),
        Err(e) => panic!("{e:?}"),
    }
    assert!(d.samples(Sampling::MemoryUtilization, None).is_ok());
    assert!(matches!(
        d.samples(Sampling::Power, None),
        Err(NvmlError::NotSupported)
    ));
}

//! MIG (scenarios/mig.yaml): GPU 0 has 3g.40gb (GI 1) + 2g.20gb (GI 5) +
//! 1g.10gb (GI 13, idle); GPU 1 has MIG off.

mod common;

use common::{shared, MIB};
use nvml_wrapper::enums::gpm::GpmMetricId;
use nvml_wrapper::error::NvmlError;
use nvml_wrapper::gpm::gpm_metrics_get;
use nvml_wrapper::{Device, Nvml};
use nvml_wrapper_sys::bindings::*;

fn nvml() -> &'static Nvml {
    shared("mig.yaml")
}

fn instance_ids(dev: &Device) -> (u32, u32, u32, u32) {
    let lib = nvml().lib();
    let (gi_f, ci_f) = (
        lib.nvmlDeviceGetGpuInstanceId.as_ref().unwrap(),
        lib.nvmlDeviceGetComputeInstanceId.as_ref().unwrap(),
    );
    let (mut gi, mut ci) = (0, 0);
    let r1 = unsafe { gi_f(dev.handle(), &mut gi) };
    let r2 = unsafe { ci_f(dev.handle(), &mut ci) };
    (r1, gi, r2, ci)
}

#[test]
fn mig_mode_and_handles() {
    let gpu = nvml().device_by_index(0).unwrap();
    let mode = gpu.mig_mode().unwrap();
    assert_eq!((mode.current, mode.pending), (1, 1));
    assert_eq!(gpu.mig_device_count().unwrap(), 7);
    let migs: Vec<Device> = (0..3)
        .map(|i| gpu.mig_device_by_index(i).unwrap())
        .collect();
    for i in 3..7 {
        assert!(matches!(
            gpu.mig_device_by_index(i),
            Err(NvmlError::NotFound)
        ));
    }
    assert!(matches!(
        gpu.mig_device_by_index(7),
        Err(NvmlError::InvalidArg)
    ));

    // Enumerated in GPU-instance-id order.
    let expect = [
        ("3g.40gb", 1, 60, 3, 40448),
        ("2g.20gb", 5, 32, 2, 20096),
        ("1g.10gb", 13, 16, 1, 9984),
    ];
    let parent_uuid = gpu.uuid().unwrap();
    for (mig, (profile, gi, sms, slices, mem_mb)) in migs.iter().zip(expect) {
        assert!(mig.mig_is_mig_device_handle().unwrap());
        assert_eq!(
            mig.name().unwrap(),
            format!("NVIDIA H100 80GB HBM3 MIG {profile}")
        );
        let uuid = mig.uuid().unwrap();
        assert!(uuid.starts_with("MIG-"), "{uuid}");
        assert_ne!(uuid, parent_uuid);
        assert_eq!(
            mig.mig_parent_device().unwrap().uuid().unwrap(),
            parent_uuid
        );
        assert_eq!(instance_ids(mig), (0, gi, 0, 0));
        let a = mig.attributes().unwrap();
        assert_eq!(a.multiprocessor_count, sms);
        assert_eq!(a.gpu_instance_slice_count, slices);
        assert_eq!(a.compute_instance_slice_count, slices);
        assert_eq!(a.memory_size_mb, mem_mb);
        assert_eq!(mig.memory_info().unwrap().total, mem_mb * MIB);
        // MIG handles answer identity and memory only.
        assert!(matches!(mig.power_usage(), Err(NvmlError::NotSupported)));
        assert!(matches!(
            mig.utilization_rates(),
            Err(NvmlError::NotSupported)
        ));
        let by_uuid = nvml().device_by_uuid(uuid.as_str()).unwrap();
        assert!(by_uuid.mig_is_mig_device_handle().unwrap());
    }
    // A full GPU handle has no instance ids.
    assert_eq!(instance_ids(&gpu).0, 2);
    assert_eq!(instance_ids(&nvml().device_by_index(1).unwrap()).0, 2);
}

#[test]
fn processes_per_instance() {
    let gpu = nvml().device_by_index(0).unwrap();
    let all: Vec<_> = gpu
        .running_compute_processes()
        .unwrap()
        .into_iter()
        .map(|p| (p.pid, p.gpu_instance_id, p.compute_instance_id))
        .collect();
    assert_eq!(all, [(2101, Some(1), Some(0)), (2102, Some(5), Some(0))]);

    let first = gpu.mig_device_by_index(0).unwrap();
    let procs = first.running_compute_processes().unwrap();
    assert_eq!(procs.iter().map(|p| p.pid).collect::<Vec<_>>(), [2101]);
    let m = first.memory_info().unwrap();
    assert_eq!(m.used, (31250 + 12) * MIB);
    assert_eq!(m.reserved, 0);

    let idle = gpu.mig_device_by_index(2).unwrap();
    assert!(idle.running_compute_processes().unwrap().is_empty());
    assert_eq!(idle.memory_info().unwrap().used, 0);

    // The parent's memory is the sum of its instances'.
    assert_eq!(
        gpu.memory_info().unwrap().used,
        (31250 + 12 + 12020 + 12) * MIB
    );
}

#[test]
fn utilization_is_not_supported_with_mig() {
    let gpu = nvml().device_by_index(0).unwrap();
    assert!(matches!(
        gpu.utilization_rates(),
        Err(NvmlError::NotSupported)
    ));
    assert!(matches!(
        gpu.process_utilization_stats(None),
        Err(NvmlError::NotSupported)
    ));
    // Device-level telemetry still works on the parent.
    assert!(gpu.power_usage().unwrap() > 74_000);
    let plain = nvml().device_by_index(1).unwrap();
    assert_eq!(plain.utilization_rates().unwrap().gpu, 55);
    assert_eq!(plain.process_utilization_stats(None).unwrap().len(), 1);
}

#[test]
fn gpu_instance_profiles() {
    let gpu = nvml().device_by_index(0).unwrap();
    let p = gpu.profile_info(NVML_GPU_INSTANCE_PROFILE_1_SLICE).unwrap();
    assert_eq!(
        (
            p.id,
            p.slice_count,
            p.instance_count,
            p.multiprocessor_count
        ),
        (19, 1, 7, 16)
    );
    assert_eq!(p.memory_size_mb, 9984);
    let p = gpu
        .profile_info(NVML_GPU_INSTANCE_PROFILE_1_SLICE_REV2)
        .unwrap();
    assert_eq!(
        (p.id, p.multiprocessor_count, p.instance_count),
        (15, 26, 4)
    );
    let p = gpu
        .profile_info(NVML_GPU_INSTANCE_PROFILE_1_SLICE_REV1)
        .unwrap();
    assert_eq!((p.id, p.ofa_count), (20, 1));
    let p = gpu.profile_info(NVML_GPU_INSTANCE_PROFILE_7_SLICE).unwrap();
    assert_eq!((p.id, p.slice_count, p.multiprocessor_count), (0, 7, 132));
    assert!(matches!(
        gpu.profile_info(NVML_GPU_INSTANCE_PROFILE_8_SLICE),
        Err(NvmlError::NotSupported)
    ));
    assert!(matches!(
        gpu.profile_info(NVML_GPU_INSTANCE_PROFILE_COUNT),
        Err(NvmlError::InvalidArg)
    ));

    let f = nvml()
        .lib()
        .nvmlDeviceGetGpuInstanceProfileInfoV
        .as_ref()
        .unwrap();
    let mut v2: nvmlGpuInstanceProfileInfo_v2_t = unsafe { std::mem::zeroed() };
    v2.version = std::mem::size_of::<nvmlGpuInstanceProfileInfo_v2_t>() as u32 | (2 << 24);
    assert_eq!(
        unsafe { f(gpu.handle(), NVML_GPU_INSTANCE_PROFILE_3_SLICE, &mut v2) },
        0
    );
    let name = unsafe { std::ffi::CStr::from_ptr(v2.name.as_ptr()) };
    assert_eq!(name.to_str().unwrap(), "MIG 3g.40gb");
    assert_eq!(
        (v2.id, v2.multiprocessorCount, v2.memorySizeMB),
        (9, 60, 40448)
    );
    v2.version = 1;
    assert_eq!(unsafe { f(gpu.handle(), 0, &mut v2) }, 25);
}

#[test]
fn gpm_per_instance() {
    let nvml = nvml();
    let gpu = nvml.device_by_index(0).unwrap();
    let ids = [
        GpmMetricId::SmUtil,
        GpmMetricId::AnyTensorUtil,
        GpmMetricId::DramBwUtil,
    ];
    let get = |a, b| -> Vec<f64> {
        gpm_metrics_get(nvml, a, b, &ids)
            .unwrap()
            .into_iter()
            .map(|r| r.unwrap().value)
            .collect()
    };
    let (a, b) = (
        gpu.gpm_mig_sample(1).unwrap(),
        gpu.gpm_mig_sample(1).unwrap(),
    );
    assert_eq!(get(&a, &b), [71.5, 48.0, 31.0]);
    let (a, b) = (
        gpu.gpm_mig_sample(5).unwrap(),
        gpu.gpm_mig_sample(5).unwrap(),
    );
    assert_eq!(get(&a, &b), [38.0, 12.0, 14.0]);
    let (a, b) = (
        gpu.gpm_mig_sample(13).unwrap(),
        gpu.gpm_mig_sample(13).unwrap(),
    );
    assert_eq!(get(&a, &b), [0.0, 0.0, 0.0]);
    assert!(matches!(gpu.gpm_mig_sample(2), Err(NvmlError::InvalidArg)));
    // The whole GPU weighs instances by their compute slices.
    let (a, b) = (gpu.gpm_sample().unwrap(), gpu.gpm_sample().unwrap());
    let whole = get(&a, &b);
    assert!((whole[0] - (71.5 * 3.0 + 38.0 * 2.0) / 7.0).abs() < 1e-9);
    // Samples of different instances cannot be compared.
    let (a, b) = (
        gpu.gpm_mig_sample(1).unwrap(),
        gpu.gpm_mig_sample(5).unwrap(),
    );
    assert!(matches!(
        gpm_metrics_get(nvml, &a, &b, &ids),
        Err(NvmlError::InvalidArg)
    ));
}

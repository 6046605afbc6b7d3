//! MIG: mode, MIG device handles and their attributes, and the GPU
//! instance profile table.

use crate::sku::MigProfile;
use crate::state::*;
use nvml_wrapper_sys::bindings::*;
use std::os::raw::c_uint;

/// Calls that take the parent GPU reject MIG handles as an invalid argument.
fn parent<'a>(ctx: &'a Ctx) -> NvResult<&'a crate::devices::GpuDef> {
    if ctx.dev()?.mig.is_some() {
        return Err(INVALID_ARGUMENT);
    }
    ctx.gpu()
}

/// MIG is "enabled" exactly when the scenario GPU has a `mig` section; the
/// fake never has a pending change.
///
/// # Safety
/// `current` and `pending` must be null or writable.
#[no_mangle]
pub unsafe extern "C" fn nvmlDeviceGetMigMode(
    device: nvmlDevice_t,
    current: *mut c_uint,
    pending: *mut c_uint,
) -> nvmlReturn_t {
    entry("nvmlDeviceGetMigMode", Target::Device(device), |ctx| {
        let on = parent(ctx)?.mig.is_some() as c_uint;
        let (c, p) = (out(current)?, out(pending)?);
        *c = on;
        *p = on;
        Ok(())
    })
}

/// 7 with MIG on, 0 with MIG off (as documented: "zero if MIG is not enabled").
///
/// # Safety
/// `count` must be null or writable.
#[no_mangle]
pub unsafe extern "C" fn nvmlDeviceGetMaxMigDeviceCount(
    device: nvmlDevice_t,
    count: *mut c_uint,
) -> nvmlReturn_t {
    entry(
        "nvmlDeviceGetMaxMigDeviceCount",
        Target::Device(device),
        |ctx| {
            *out(count)? = if parent(ctx)?.mig.is_some() { 7 } else { 0 };
            Ok(())
        },
    )
}

/// Existing MIG devices occupy indexes 0..n in GPU-instance-id order; the
/// remaining indexes up to the maximum are NOT_FOUND.
///
/// # Safety
/// `mig_device` must be null or writable.
#[no_mangle]
pub unsafe extern "C" fn nvmlDeviceGetMigDeviceHandleByIndex(
    device: nvmlDevice_t,
    index: c_uint,
    mig_device: *mut nvmlDevice_t,
) -> nvmlReturn_t {
    entry(
        "nvmlDeviceGetMigDeviceHandleByIndex",
        Target::Device(device),
        |ctx| {
            let gpu = parent(ctx)?;
            let dst = out(mig_device)?;
            if gpu.mig.is_none() {
                return Err(NOT_SUPPORTED);
            }
            if index >= 7 {
                return Err(INVALID_ARGUMENT);
            }
            let layout = &ctx.world.phase(ctx.phase).mig[gpu.index];
            let slot = *layout.enumerated.get(index as usize).ok_or(NOT_FOUND)?;
            *dst = device_handle(DevRef {
                gpu: gpu.index,
                mig: Some(slot),
            });
            Ok(())
        },
    )
}

/// # Safety
/// `is_mig` must be null or writable.
#[no_mangle]
pub unsafe extern "C" fn nvmlDeviceIsMigDeviceHandle(
    device: nvmlDevice_t,
    is_mig: *mut c_uint,
) -> nvmlReturn_t {
    entry(
        "nvmlDeviceIsMigDeviceHandle",
        Target::Device(device),
        |ctx| {
            *out(is_mig)? = ctx.dev()?.mig.is_some() as c_uint;
            Ok(())
        },
    )
}

/// # Safety
/// `device` must be null or writable.
#[no_mangle]
pub unsafe extern "C" fn nvmlDeviceGetDeviceHandleFromMigDeviceHandle(
    mig_device: nvmlDevice_t,
    device: *mut nvmlDevice_t,
) -> nvmlReturn_t {
    entry(
        "nvmlDeviceGetDeviceHandleFromMigDeviceHandle",
        Target::Device(mig_device),
        |ctx| {
            let d = ctx.dev()?;
            let dst = out(device)?;
            if d.mig.is_none() {
                return Err(INVALID_ARGUMENT);
            }
            *dst = device_handle(DevRef {
                gpu: d.gpu,
                mig: None,
            });
            Ok(())
        },
    )
}

fn instance_field(
    name: &'static str,
    device: nvmlDevice_t,
    id: *mut c_uint,
    pick: fn(&crate::devices::MigInstance) -> u32,
) -> nvmlReturn_t {
    entry(name, Target::Device(device), |ctx| {
        // A full GPU handle is not a MIG device: INVALID_ARGUMENT, like real NVML.
        let inst = ctx.mig_instance()?.ok_or(INVALID_ARGUMENT)?;
        // SAFETY: the caller passes null or a writable id.
        *unsafe { out(id)? } = pick(inst);
        Ok(())
    })
}

/// # Safety
/// `id` must be null or writable.
#[no_mangle]
pub unsafe extern "C" fn nvmlDeviceGetGpuInstanceId(
    device: nvmlDevice_t,
    id: *mut c_uint,
) -> nvmlReturn_t {
    instance_field("nvmlDeviceGetGpuInstanceId", device, id, |m| {
        m.gpu_instance_id
    })
}

/// # Safety
/// `id` must be null or writable.
#[no_mangle]
pub unsafe extern "C" fn nvmlDeviceGetComputeInstanceId(
    device: nvmlDevice_t,
    id: *mut c_uint,
) -> nvmlReturn_t {
    instance_field("nvmlDeviceGetComputeInstanceId", device, id, |m| {
        m.compute_instance_id
    })
}

/// Documented as MIG-handle only; each instance has one compute instance
/// spanning all of it, so GI and CI slice counts are the profile's.
///
/// # Safety
/// `attrs` must be null or writable.
#[no_mangle]
pub unsafe extern "C" fn nvmlDeviceGetAttributes_v2(
    device: nvmlDevice_t,
    attrs: *mut nvmlDeviceAttributes_t,
) -> nvmlReturn_t {
    entry(
        "nvmlDeviceGetAttributes_v2",
        Target::Device(device),
        |ctx| {
            let inst = ctx.mig_instance()?.ok_or(NOT_SUPPORTED)?;
            let dst = out(attrs)?;
            let p = inst.profile;
            dst.multiprocessorCount = p.sms;
            dst.sharedCopyEngineCount = p.copy_engines;
            dst.sharedDecoderCount = p.decoders;
            dst.sharedEncoderCount = p.encoders;
            dst.sharedJpegCount = p.jpegs;
            dst.sharedOfaCount = p.ofas;
            dst.gpuInstanceSliceCount = p.slices;
            dst.computeInstanceSliceCount = p.slices;
            dst.memorySizeMB = p.memory_mib;
            Ok(())
        },
    )
}

/// Profile lookup shared by both profile-info calls. The table is answered
/// whether MIG is on or off (`nvidia-smi mig -lgip` worked with MIG off).
fn profile_for(ctx: &Ctx<'_>, index: c_uint) -> NvResult<&'static MigProfile> {
    let gpu = parent(ctx)?;
    if index >= NVML_GPU_INSTANCE_PROFILE_COUNT {
        return Err(INVALID_ARGUMENT);
    }
    gpu.sku.profile_by_index(index).ok_or(NOT_SUPPORTED)
}

/// # Safety
/// `info` must be null or writable.
#[no_mangle]
pub unsafe extern "C" fn nvmlDeviceGetGpuInstanceProfileInfo(
    device: nvmlDevice_t,
    profile: c_uint,
    info: *mut nvmlGpuInstanceProfileInfo_t,
) -> nvmlReturn_t {
    entry(
        "nvmlDeviceGetGpuInstanceProfileInfo",
        Target::Device(device),
        |ctx| {
            let p = profile_for(ctx, profile)?;
            let dst = out(info)?;
            *dst = nvmlGpuInstanceProfileInfo_t {
                id: p.id,
                isP2pSupported: 0,
                sliceCount: p.slices,
                instanceCount: p.instance_count,
                multiprocessorCount: p.sms,
                copyEngineCount: p.copy_engines,
                decoderCount: p.decoders,
                encoderCount: p.encoders,
                jpegCount: p.jpegs,
                ofaCount: p.ofas,
                memorySizeMB: p.memory_mib,
            };
            Ok(())
        },
    )
}

const fn struct_version(size: usize, version: u32) -> u32 {
    size as u32 | (version << 24)
}

/// Versioned variant: accepts the v2 and v3 layouts, told apart by
/// `info->version` as nvml.h's NVML_STRUCT_VERSION encodes it.
///
/// # Safety
/// `info` must be null or point to a writable struct of the layout its `version` names.
#[no_mangle]
pub unsafe extern "C" fn nvmlDeviceGetGpuInstanceProfileInfoV(
    device: nvmlDevice_t,
    profile: c_uint,
    info: *mut nvmlGpuInstanceProfileInfo_v2_t,
) -> nvmlReturn_t {
    entry(
        "nvmlDeviceGetGpuInstanceProfileInfoV",
        Target::Device(device),
        |ctx| {
            let version = out(info)?.version;
            let p = profile_for(ctx, profile)?;
            let name = format!("MIG {}", p.name);
            if version == struct_version(std::mem::size_of::<nvmlGpuInstanceProfileInfo_v2_t>(), 2)
            {
                let dst = out(info)?;
                dst.id = p.id;
                dst.isP2pSupported = 0;
                dst.sliceCount = p.slices;
                dst.instanceCount = p.instance_count;
                dst.multiprocessorCount = p.sms;
                dst.copyEngineCount = p.copy_engines;
                dst.decoderCount = p.decoders;
                dst.encoderCount = p.encoders;
                dst.jpegCount = p.jpegs;
                dst.ofaCount = p.ofas;
                dst.memorySizeMB = p.memory_mib;
                fill_array(&mut dst.name, &name);
                Ok(())
            } else if version
                == struct_version(std::mem::size_of::<nvmlGpuInstanceProfileInfo_v3_t>(), 3)
            {
                let dst = out(info as *mut nvmlGpuInstanceProfileInfo_v3_t)?;
                dst.id = p.id;
                dst.sliceCount = p.slices;
                dst.instanceCount = p.instance_count;
                dst.multiprocessorCount = p.sms;
                dst.copyEngineCount = p.copy_engines;
                dst.decoderCount = p.decoders;
                dst.encoderCount = p.encoders;
                dst.jpegCount = p.jpegs;
                dst.ofaCount = p.ofas;
                dst.memorySizeMB = p.memory_mib;
                dst.capabilities = 0;
                fill_array(&mut dst.name, &name);
                Ok(())
            } else {
                Err(VERSION_MISMATCH)
            }
        },
    )
}

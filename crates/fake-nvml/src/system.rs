//! Library lifecycle, system-wide queries and device enumeration.

use crate::state::*;
use nvml_wrapper_sys::bindings::*;
use std::ffi::CStr;
use std::os::raw::{c_char, c_int, c_uint};

#[no_mangle]
pub extern "C" fn nvmlInit_v2() -> nvmlReturn_t {
    init("nvmlInit_v2")
}

/// Flags only relax what real NVML does when GPUs are missing or broken;
/// the fake always "finds" the scenario's GPUs, so they change nothing.
#[no_mangle]
pub extern "C" fn nvmlInitWithFlags(_flags: c_uint) -> nvmlReturn_t {
    init("nvmlInitWithFlags")
}

#[no_mangle]
pub extern "C" fn nvmlShutdown() -> nvmlReturn_t {
    shutdown()
}

/// Static strings, worded like libnvidia-ml's, valid for the process lifetime.
#[no_mangle]
pub extern "C" fn nvmlErrorString(result: nvmlReturn_t) -> *const c_char {
    let s: &'static CStr = match result {
        0 => c"Success",
        1 => c"Uninitialized",
        2 => c"Invalid Argument",
        3 => c"Not Supported",
        4 => c"Insufficient Permissions",
        5 => c"Already Initialized",
        6 => c"Not Found",
        7 => c"Insufficient Size",
        8 => c"Insufficient External Power",
        9 => c"Driver Not Loaded",
        10 => c"Timeout",
        11 => c"Interrupt request issue",
        12 => c"NVML Shared Library Not Found",
        13 => c"Function Not Found",
        14 => c"Corrupted infoROM",
        15 => c"GPU is lost",
        16 => c"GPU requires restart",
        17 => c"The operating system has blocked the request.",
        18 => c"RM has detected an NVML/RM version mismatch.",
        19 => c"In use by another client",
        20 => c"Insufficient Memory",
        21 => c"No data",
        22 => c"The requested vgpu operation is not available on target device, becasue ECC is enabled",
        23 => c"Insufficient resources for request",
        24 => c"Frequency not supported",
        25 => c"Argument version mismatch",
        26 => c"Deprecated",
        27 => c"Not Ready",
        28 => c"GPU not found",
        29 => c"Invalid state",
        30 => c"Reset type not supported",
        _ => c"Unknown Error",
    };
    s.as_ptr()
}

/// # Safety
/// `version` must be valid for `length` bytes.
#[no_mangle]
pub unsafe extern "C" fn nvmlSystemGetDriverVersion(
    version: *mut c_char,
    length: c_uint,
) -> nvmlReturn_t {
    entry("nvmlSystemGetDriverVersion", Target::None, |ctx| {
        write_cstr(version, length, &ctx.world.driver_version)
    })
}

/// # Safety
/// `version` must be valid for `length` bytes.
#[no_mangle]
pub unsafe extern "C" fn nvmlSystemGetNVMLVersion(
    version: *mut c_char,
    length: c_uint,
) -> nvmlReturn_t {
    entry("nvmlSystemGetNVMLVersion", Target::None, |ctx| {
        write_cstr(version, length, &ctx.world.nvml_version)
    })
}

/// # Safety
/// `cuda` must be null or writable.
#[no_mangle]
pub unsafe extern "C" fn nvmlSystemGetCudaDriverVersion_v2(cuda: *mut c_int) -> nvmlReturn_t {
    entry("nvmlSystemGetCudaDriverVersion_v2", Target::None, |ctx| {
        *out(cuda)? = ctx.world.cuda_driver_version;
        Ok(())
    })
}

/// # Safety
/// `count` must be null or writable.
#[no_mangle]
pub unsafe extern "C" fn nvmlDeviceGetCount_v2(count: *mut c_uint) -> nvmlReturn_t {
    entry("nvmlDeviceGetCount_v2", Target::None, |ctx| {
        *out(count)? = ctx.world.gpus.len() as c_uint;
        Ok(())
    })
}

/// A lost GPU still counts, but its handle cannot be had: that is how
/// `nvidia-smi` ends up printing "Unable to determine the device handle".
///
/// # Safety
/// `device` must be null or writable.
#[no_mangle]
pub unsafe extern "C" fn nvmlDeviceGetHandleByIndex_v2(
    index: c_uint,
    device: *mut nvmlDevice_t,
) -> nvmlReturn_t {
    entry(
        "nvmlDeviceGetHandleByIndex_v2",
        Target::Index(index),
        |ctx| {
            let dst = out(device)?;
            if index as usize >= ctx.world.gpus.len() {
                return Err(INVALID_ARGUMENT);
            }
            *dst = device_handle(DevRef {
                gpu: index as usize,
                mig: None,
            });
            Ok(())
        },
    )
}

/// Accepts GPU and MIG UUIDs, as drivers since R470 do.
///
/// # Safety
/// `uuid` must be null or a NUL-terminated string; `device` null or writable.
#[no_mangle]
pub unsafe extern "C" fn nvmlDeviceGetHandleByUUID(
    uuid: *const c_char,
    device: *mut nvmlDevice_t,
) -> nvmlReturn_t {
    entry("nvmlDeviceGetHandleByUUID", Target::None, |ctx| {
        if uuid.is_null() {
            return Err(INVALID_ARGUMENT);
        }
        let dst = out(device)?;
        let wanted = CStr::from_ptr(uuid)
            .to_str()
            .map_err(|_| INVALID_ARGUMENT)?;
        let phase = ctx.world.phase(ctx.phase);
        for (gi, gpu) in ctx.world.gpus.iter().enumerate() {
            let found = if gpu.uuid == wanted {
                Some(None)
            } else {
                gpu.mig
                    .iter()
                    .flatten()
                    .position(|m| m.uuid == wanted)
                    .filter(|&slot| phase.mig[gi].contains(slot))
                    .map(Some)
            };
            if let Some(mig) = found {
                if phase.gpus[gi].lost {
                    return Err(GPU_IS_LOST);
                }
                *dst = device_handle(DevRef { gpu: gi, mig });
                return Ok(());
            }
        }
        Err(NOT_FOUND)
    })
}

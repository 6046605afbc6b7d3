//! Static device identity and memory. MIG device handles answer only what
//! real NVML answers for them (name, UUID, memory); the rest is NOT_SUPPORTED.

use crate::state::*;
use nvml_wrapper_sys::bindings::*;
use std::os::raw::{c_char, c_uint};

const MIB: u64 = 1 << 20;

/// # Safety
/// `index` must be null or writable.
#[no_mangle]
pub unsafe extern "C" fn nvmlDeviceGetIndex(
    device: nvmlDevice_t,
    index: *mut c_uint,
) -> nvmlReturn_t {
    entry("nvmlDeviceGetIndex", Target::Device(device), |ctx| {
        let gpu = ctx.full_gpu()?;
        *out(index)? = gpu.index as c_uint;
        Ok(())
    })
}

/// # Safety
/// `minor` must be null or writable.
#[no_mangle]
pub unsafe extern "C" fn nvmlDeviceGetMinorNumber(
    device: nvmlDevice_t,
    minor: *mut c_uint,
) -> nvmlReturn_t {
    entry("nvmlDeviceGetMinorNumber", Target::Device(device), |ctx| {
        *out(minor)? = ctx.full_gpu()?.minor_number;
        Ok(())
    })
}

/// MIG devices are named like the driver names them: "<parent> MIG <profile>".
///
/// # Safety
/// `name` must be valid for `length` bytes.
#[no_mangle]
pub unsafe extern "C" fn nvmlDeviceGetName(
    device: nvmlDevice_t,
    name: *mut c_char,
    length: c_uint,
) -> nvmlReturn_t {
    entry("nvmlDeviceGetName", Target::Device(device), |ctx| {
        let gpu = ctx.gpu()?;
        let text = match ctx.mig_instance()? {
            Some(m) => format!("{} MIG {}", gpu.sku.name, m.profile.name),
            None => gpu.sku.name.to_string(),
        };
        write_cstr(name, length, &text)
    })
}

/// # Safety
/// `uuid` must be valid for `length` bytes.
#[no_mangle]
pub unsafe extern "C" fn nvmlDeviceGetUUID(
    device: nvmlDevice_t,
    uuid: *mut c_char,
    length: c_uint,
) -> nvmlReturn_t {
    entry("nvmlDeviceGetUUID", Target::Device(device), |ctx| {
        let text = match ctx.mig_instance()? {
            Some(m) => m.uuid.clone(),
            None => ctx.gpu()?.uuid.clone(),
        };
        write_cstr(uuid, length, &text)
    })
}

/// # Safety
/// `pci` must be null or writable.
#[no_mangle]
pub unsafe extern "C" fn nvmlDeviceGetPciInfo_v3(
    device: nvmlDevice_t,
    pci: *mut nvmlPciInfo_t,
) -> nvmlReturn_t {
    entry("nvmlDeviceGetPciInfo_v3", Target::Device(device), |ctx| {
        let gpu = ctx.full_gpu()?;
        let dst = out(pci)?;
        fill_array(&mut dst.busIdLegacy, &gpu.pci.bus_id_legacy());
        fill_array(&mut dst.busId, &gpu.pci.bus_id());
        dst.domain = gpu.pci.domain;
        dst.bus = gpu.pci.bus;
        dst.device = gpu.pci.device;
        dst.pciDeviceId = gpu.sku.pci_device_id;
        dst.pciSubSystemId = gpu.sku.pci_subsystem_id;
        Ok(())
    })
}

/// # Safety
/// `mode` must be null or writable.
#[no_mangle]
pub unsafe extern "C" fn nvmlDeviceGetComputeMode(
    device: nvmlDevice_t,
    mode: *mut nvmlComputeMode_t,
) -> nvmlReturn_t {
    entry("nvmlDeviceGetComputeMode", Target::Device(device), |ctx| {
        *out(mode)? = ctx.full_gpu()?.compute_mode;
        Ok(())
    })
}

/// # Safety
/// `mode` must be null or writable.
#[no_mangle]
pub unsafe extern "C" fn nvmlDeviceGetVirtualizationMode(
    device: nvmlDevice_t,
    mode: *mut nvmlGpuVirtualizationMode_t,
) -> nvmlReturn_t {
    entry(
        "nvmlDeviceGetVirtualizationMode",
        Target::Device(device),
        |ctx| {
            *out(mode)? = ctx.full_gpu()?.virtualization;
            Ok(())
        },
    )
}

/// (total, reserved, used) in bytes for a GPU or a MIG instance.
fn memory(ctx: &Ctx) -> NvResult<(u64, u64, u64)> {
    let gpu = ctx.gpu()?;
    let act = ctx.act()?;
    Ok(match ctx.dev()?.mig {
        Some(i) => {
            let profile = gpu.mig.as_ref().ok_or(INVALID_ARGUMENT)?[i].profile;
            (
                profile.memory_mib * MIB,
                0,
                act.mig[i].memory_used_mib * MIB,
            )
        }
        None => (
            gpu.sku.memory_total_mib * MIB,
            gpu.sku.memory_reserved_mib * MIB,
            act.memory_used_mib * MIB,
        ),
    })
}

/// `version` must be NVML_STRUCT_VERSION(Memory, 2), as nvml.h defines it.
///
/// # Safety
/// `memory` must be null or a writable nvmlMemory_v2_t.
#[no_mangle]
pub unsafe extern "C" fn nvmlDeviceGetMemoryInfo_v2(
    device: nvmlDevice_t,
    mem: *mut nvmlMemory_v2_t,
) -> nvmlReturn_t {
    entry(
        "nvmlDeviceGetMemoryInfo_v2",
        Target::Device(device),
        |ctx| {
            let dst = out(mem)?;
            let expected = (std::mem::size_of::<nvmlMemory_v2_t>() as u32) | (2 << 24);
            if dst.version != expected {
                return Err(VERSION_MISMATCH);
            }
            let (total, reserved, used) = memory(ctx)?;
            dst.total = total;
            dst.reserved = reserved;
            dst.used = used;
            dst.free = total - reserved - used;
            Ok(())
        },
    )
}

/// The v1 struct has no `reserved`: the driver counts it as used.
///
/// # Safety
/// `memory` must be null or a writable nvmlMemory_t.
#[no_mangle]
pub unsafe extern "C" fn nvmlDeviceGetMemoryInfo(
    device: nvmlDevice_t,
    mem: *mut nvmlMemory_t,
) -> nvmlReturn_t {
    entry("nvmlDeviceGetMemoryInfo", Target::Device(device), |ctx| {
        let dst = out(mem)?;
        let (total, reserved, used) = memory(ctx)?;
        dst.total = total;
        dst.used = used + reserved;
        dst.free = total - reserved - used;
        Ok(())
    })
}

/// # Safety
/// `current` and `pending` must be null or writable.
#[no_mangle]
pub unsafe extern "C" fn nvmlDeviceGetEccMode(
    device: nvmlDevice_t,
    current: *mut nvmlEnableState_t,
    pending: *mut nvmlEnableState_t,
) -> nvmlReturn_t {
    entry("nvmlDeviceGetEccMode", Target::Device(device), |ctx| {
        let on = ctx.full_gpu()?.ecc_enabled as nvmlEnableState_t;
        let (c, p) = (out(current)?, out(pending)?);
        *c = on;
        *p = on;
        Ok(())
    })
}

//! Time-varying per-GPU readings: utilization, power, energy, thermals,
//! clocks, ECC and PCIe. All of them read the current phase of the timeline.

use crate::state::*;
use nvml_wrapper_sys::bindings::*;
use std::os::raw::{c_uint, c_ulonglong};

/// Real NVML refuses device-level utilization once MIG is on (the GPU is
/// no longer one scheduling domain); MIG handles refuse it too.
///
/// # Safety
/// `util` must be null or writable.
#[no_mangle]
pub unsafe extern "C" fn nvmlDeviceGetUtilizationRates(
    device: nvmlDevice_t,
    util: *mut nvmlUtilization_t,
) -> nvmlReturn_t {
    entry(
        "nvmlDeviceGetUtilizationRates",
        Target::Device(device),
        |ctx| {
            if ctx.full_gpu()?.mig.is_some() {
                return Err(NOT_SUPPORTED);
            }
            let dst = out(util)?;
            let act = ctx.act()?;
            dst.gpu = act.utilization;
            dst.memory = act.memory_utilization;
            Ok(())
        },
    )
}

/// Milliwatts.
///
/// # Safety
/// `power` must be null or writable.
#[no_mangle]
pub unsafe extern "C" fn nvmlDeviceGetPowerUsage(
    device: nvmlDevice_t,
    power: *mut c_uint,
) -> nvmlReturn_t {
    entry("nvmlDeviceGetPowerUsage", Target::Device(device), |ctx| {
        ctx.full_gpu()?;
        *out(power)? = (ctx.act()?.power_w * 1000.0).round() as c_uint;
        Ok(())
    })
}

/// # Safety
/// `limit` must be null or writable.
#[no_mangle]
pub unsafe extern "C" fn nvmlDeviceGetEnforcedPowerLimit(
    device: nvmlDevice_t,
    limit: *mut c_uint,
) -> nvmlReturn_t {
    entry(
        "nvmlDeviceGetEnforcedPowerLimit",
        Target::Device(device),
        |ctx| {
            *out(limit)? = ctx.full_gpu()?.power_limit_mw;
            Ok(())
        },
    )
}

/// Millijoules since "driver load": the scenario's start value plus the
/// phases' power integrated over wall-clock time since init, so the counter
/// only ever grows and its rate matches the reported power. On a superchip
/// module the counter is the module's: the rest of the module's power is in it.
///
/// # Safety
/// `energy` must be null or writable.
#[no_mangle]
pub unsafe extern "C" fn nvmlDeviceGetTotalEnergyConsumption(
    device: nvmlDevice_t,
    energy: *mut c_ulonglong,
) -> nvmlReturn_t {
    entry(
        "nvmlDeviceGetTotalEnergyConsumption",
        Target::Device(device),
        |ctx| {
            let gpu = ctx.full_gpu()?;
            let g = gpu.index;
            let world = &ctx.world;
            // W × ms = mJ.
            let other = gpu.sku.module_other_power_w;
            let mj = world
                .timeline
                .integrate(0.0, ctx.t_ms, &|p| world.phase(p).gpus[g].power_w + other);
            *out(energy)? = gpu.energy_start_mj + mj.max(0.0) as u64;
            Ok(())
        },
    )
}

/// Only the GPU die sensor exists (NVML_TEMPERATURE_GPU).
///
/// # Safety
/// `temp` must be null or writable.
#[no_mangle]
pub unsafe extern "C" fn nvmlDeviceGetTemperature(
    device: nvmlDevice_t,
    sensor: nvmlTemperatureSensors_t,
    temp: *mut c_uint,
) -> nvmlReturn_t {
    entry("nvmlDeviceGetTemperature", Target::Device(device), |ctx| {
        ctx.full_gpu()?;
        if sensor != nvmlTemperatureSensors_enum_NVML_TEMPERATURE_GPU {
            return Err(INVALID_ARGUMENT);
        }
        *out(temp)? = ctx.act()?.temperature_c;
        Ok(())
    })
}

/// MHz. The graphics clock equals the SM clock on these parts.
///
/// # Safety
/// `clock` must be null or writable.
#[no_mangle]
pub unsafe extern "C" fn nvmlDeviceGetClockInfo(
    device: nvmlDevice_t,
    kind: nvmlClockType_t,
    clock: *mut c_uint,
) -> nvmlReturn_t {
    entry("nvmlDeviceGetClockInfo", Target::Device(device), |ctx| {
        ctx.full_gpu()?;
        let act = ctx.act()?;
        let mhz = match kind {
            nvmlClockType_enum_NVML_CLOCK_GRAPHICS | nvmlClockType_enum_NVML_CLOCK_SM => {
                act.sm_clock_mhz
            }
            nvmlClockType_enum_NVML_CLOCK_MEM => act.mem_clock_mhz,
            nvmlClockType_enum_NVML_CLOCK_VIDEO => act.video_clock_mhz,
            _ => return Err(INVALID_ARGUMENT),
        };
        *out(clock)? = mhz;
        Ok(())
    })
}

fn clock_reasons(
    name: &'static str,
    device: nvmlDevice_t,
    reasons: *mut c_ulonglong,
) -> nvmlReturn_t {
    entry(name, Target::Device(device), |ctx| {
        ctx.full_gpu()?;
        // SAFETY: the caller passes null or a writable u64.
        *unsafe { out(reasons)? } = ctx.act()?.clock_reasons;
        Ok(())
    })
}

/// # Safety
/// `reasons` must be null or writable.
#[no_mangle]
pub unsafe extern "C" fn nvmlDeviceGetCurrentClocksEventReasons(
    device: nvmlDevice_t,
    reasons: *mut c_ulonglong,
) -> nvmlReturn_t {
    clock_reasons("nvmlDeviceGetCurrentClocksEventReasons", device, reasons)
}

/// The pre-R535 name of the same bitmask.
///
/// # Safety
/// `reasons` must be null or writable.
#[no_mangle]
pub unsafe extern "C" fn nvmlDeviceGetCurrentClocksThrottleReasons(
    device: nvmlDevice_t,
    reasons: *mut c_ulonglong,
) -> nvmlReturn_t {
    clock_reasons("nvmlDeviceGetCurrentClocksThrottleReasons", device, reasons)
}

/// # Safety
/// `counts` must be null or writable.
#[no_mangle]
pub unsafe extern "C" fn nvmlDeviceGetTotalEccErrors(
    device: nvmlDevice_t,
    error_type: nvmlMemoryErrorType_t,
    counter_type: nvmlEccCounterType_t,
    counts: *mut c_ulonglong,
) -> nvmlReturn_t {
    entry(
        "nvmlDeviceGetTotalEccErrors",
        Target::Device(device),
        |ctx| {
            if !ctx.full_gpu()?.ecc_enabled {
                return Err(NOT_SUPPORTED);
            }
            let act = ctx.act()?;
            let counters = match counter_type {
                nvmlEccCounterType_enum_NVML_VOLATILE_ECC => act.ecc_volatile,
                nvmlEccCounterType_enum_NVML_AGGREGATE_ECC => act.ecc_aggregate,
                _ => return Err(INVALID_ARGUMENT),
            };
            let value = match error_type {
                nvmlMemoryErrorType_enum_NVML_MEMORY_ERROR_TYPE_CORRECTED => counters[0],
                nvmlMemoryErrorType_enum_NVML_MEMORY_ERROR_TYPE_UNCORRECTED => counters[1],
                _ => return Err(INVALID_ARGUMENT),
            };
            *out(counts)? = value;
            Ok(())
        },
    )
}

/// # Safety
/// `value` must be null or writable.
#[no_mangle]
pub unsafe extern "C" fn nvmlDeviceGetPcieReplayCounter(
    device: nvmlDevice_t,
    value: *mut c_uint,
) -> nvmlReturn_t {
    entry(
        "nvmlDeviceGetPcieReplayCounter",
        Target::Device(device),
        |ctx| {
            ctx.full_gpu()?;
            *out(value)? = ctx.act()?.pcie_replays;
            Ok(())
        },
    )
}

/// KB/s over the last 20 ms (which is why the real call takes 20 ms; see
/// `realistic_latency`).
///
/// # Safety
/// `value` must be null or writable.
#[no_mangle]
pub unsafe extern "C" fn nvmlDeviceGetPcieThroughput(
    device: nvmlDevice_t,
    counter: nvmlPcieUtilCounter_t,
    value: *mut c_uint,
) -> nvmlReturn_t {
    entry(
        "nvmlDeviceGetPcieThroughput",
        Target::Device(device),
        |ctx| {
            ctx.full_gpu()?;
            let act = ctx.act()?;
            *out(value)? = match counter {
                nvmlPcieUtilCounter_enum_NVML_PCIE_UTIL_TX_BYTES => act.pcie_tx_kbps,
                nvmlPcieUtilCounter_enum_NVML_PCIE_UTIL_RX_BYTES => act.pcie_rx_kbps,
                _ => return Err(INVALID_ARGUMENT),
            };
            Ok(())
        },
    )
}

/// Percent over a 1 s sampling period.
///
/// # Safety
/// `util` and `period_us` must be null or writable.
#[no_mangle]
pub unsafe extern "C" fn nvmlDeviceGetEncoderUtilization(
    device: nvmlDevice_t,
    util: *mut c_uint,
    period_us: *mut c_uint,
) -> nvmlReturn_t {
    entry(
        "nvmlDeviceGetEncoderUtilization",
        Target::Device(device),
        |ctx| {
            ctx.full_gpu()?;
            let v = ctx.act()?.encoder_utilization;
            *out(util)? = v;
            *out(period_us)? = 1_000_000;
            Ok(())
        },
    )
}

/// Percent over a 1 s sampling period.
///
/// # Safety
/// `util` and `period_us` must be null or writable.
#[no_mangle]
pub unsafe extern "C" fn nvmlDeviceGetDecoderUtilization(
    device: nvmlDevice_t,
    util: *mut c_uint,
    period_us: *mut c_uint,
) -> nvmlReturn_t {
    entry(
        "nvmlDeviceGetDecoderUtilization",
        Target::Device(device),
        |ctx| {
            ctx.full_gpu()?;
            let v = ctx.act()?.decoder_utilization;
            *out(util)? = v;
            *out(period_us)? = 1_000_000;
            Ok(())
        },
    )
}

/// # Safety
/// Every pointer must be null or writable.
#[no_mangle]
pub unsafe extern "C" fn nvmlDeviceGetRemappedRows(
    device: nvmlDevice_t,
    corr: *mut c_uint,
    unc: *mut c_uint,
    pending: *mut c_uint,
    failure: *mut c_uint,
) -> nvmlReturn_t {
    entry("nvmlDeviceGetRemappedRows", Target::Device(device), |ctx| {
        ctx.full_gpu()?;
        let r = ctx.act()?.remapped_rows;
        *out(corr)? = r.correctable;
        *out(unc)? = r.uncorrectable;
        *out(pending)? = c_uint::from(r.pending);
        *out(failure)? = c_uint::from(r.failure);
        Ok(())
    })
}

/// NVML_FI_DEV_MEMORY_TEMP.
const FI_DEV_MEMORY_TEMP: c_uint = 82;

/// Only the HBM temperature is modelled; other fields answer NOT_SUPPORTED in their slot.
///
/// # Safety
/// `values` must be null or point to `count` writable entries.
#[no_mangle]
pub unsafe extern "C" fn nvmlDeviceGetFieldValues(
    device: nvmlDevice_t,
    count: std::os::raw::c_int,
    values: *mut nvmlFieldValue_t,
) -> nvmlReturn_t {
    entry("nvmlDeviceGetFieldValues", Target::Device(device), |ctx| {
        ctx.full_gpu()?;
        let n = usize::try_from(count).map_err(|_| INVALID_ARGUMENT)?;
        if values.is_null() {
            return Err(INVALID_ARGUMENT);
        }
        let temp = ctx.act()?.memory_temperature_c;
        // SAFETY: the caller passes `count` entries at `values`.
        let slots = unsafe { std::slice::from_raw_parts_mut(values, n) };
        for v in slots {
            v.timestamp = 0;
            v.latencyUsec = 0;
            if v.fieldId == FI_DEV_MEMORY_TEMP {
                v.valueType = nvmlValueType_enum_NVML_VALUE_TYPE_UNSIGNED_INT;
                v.nvmlReturn = SUCCESS;
                v.value.uiVal = temp;
            } else {
                v.nvmlReturn = NOT_SUPPORTED;
            }
        }
        Ok(())
    })
}

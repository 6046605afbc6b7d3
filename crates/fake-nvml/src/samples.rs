//! `nvmlDeviceGetSamples` for utilization, shaped like the H100's driver: a sample every
//! 200 ms of the scenario clock, each the utilization of the phase it falls in, the last 71
//! kept (docs/validation.md, "Device utilization from every NVML sample").

use crate::activity::GpuActivity;
use crate::state::*;
use nvml_wrapper_sys::bindings::*;
use std::os::raw::{c_uint, c_ulonglong};

pub const SAMPLE_PERIOD_MS: u64 = 200;
pub const SAMPLES_KEPT: u64 = 71;

/// The samples a driver holds at scenario time `now_ms`, oldest first: (timestamp µs, value).
pub fn held_samples(
    now_ms: f64,
    started_epoch_us: u64,
    value_at: impl Fn(f64) -> u32,
) -> Vec<(u64, u32)> {
    let newest = (now_ms.max(0.0) as u64) / SAMPLE_PERIOD_MS;
    let oldest = newest.saturating_sub(SAMPLES_KEPT - 1).max(1);
    (oldest..=newest)
        .map(|k| {
            let at_ms = k * SAMPLE_PERIOD_MS;
            (started_epoch_us + at_ms * 1000, value_at(at_ms as f64))
        })
        .collect()
}

/// # Safety
/// `value_type`, `count` and `samples` must be null or writable; `samples` must hold `*count`
/// entries.
#[no_mangle]
pub unsafe extern "C" fn nvmlDeviceGetSamples(
    device: nvmlDevice_t,
    kind: nvmlSamplingType_t,
    last_seen: c_ulonglong,
    value_type: *mut nvmlValueType_t,
    count: *mut c_uint,
    samples: *mut nvmlSample_t,
) -> nvmlReturn_t {
    entry("nvmlDeviceGetSamples", Target::Device(device), |ctx| {
        if ctx.full_gpu()?.mig.is_some() {
            return Err(NOT_SUPPORTED);
        }
        let pick: fn(&GpuActivity) -> u32 = match kind {
            nvmlSamplingType_enum_NVML_GPU_UTILIZATION_SAMPLES => |a| a.utilization,
            nvmlSamplingType_enum_NVML_MEMORY_UTILIZATION_SAMPLES => |a| a.memory_utilization,
            _ => return Err(NOT_SUPPORTED),
        };
        let gpu = ctx.dev()?.gpu;
        let world = ctx.world.clone();
        let fresh: Vec<nvmlSample_t> = held_samples(ctx.t_ms, ctx.rt.started_epoch_us, |at_ms| {
            pick(&world.phase(world.timeline.phase_at(at_ms)).gpus[gpu])
        })
        .into_iter()
        .filter(|&(ts, _)| ts > last_seen)
        .map(|(ts, v)| nvmlSample_t {
            timeStamp: ts,
            sampleValue: nvmlValue_t { uiVal: v },
        })
        .collect();
        let count = out(count)?;
        if fresh.is_empty() {
            return Err(NOT_FOUND);
        }
        *out(value_type)? = nvmlValueType_enum_NVML_VALUE_TYPE_UNSIGNED_INT;
        let needed = fresh.len() as c_uint;
        if samples.is_null() {
            *count = needed;
            return Ok(());
        }
        if *count < needed {
            *count = needed;
            return Err(INSUFFICIENT_SIZE);
        }
        std::ptr::copy_nonoverlapping(fresh.as_ptr(), samples, fresh.len());
        *count = needed;
        Ok(())
    })
}

#[cfg(test)]
#[path = "samples_tests.rs"]
mod tests;

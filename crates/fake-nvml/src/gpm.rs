//! GPM (Hopper+ performance monitoring): samples are timestamps on the
//! scenario clock, and a metric between two samples is the time-weighted
//! average of the phases' values in between — so short intervals across a
//! phase change blend the two phases as real counters would.

use crate::activity::GpmValues;
use crate::handles::GpmSampleRec;
use crate::state::*;
use nvml_wrapper_sys::bindings::*;
use std::ffi::CStr;
use std::os::raw::{c_char, c_uint};

const SAMPLE_TAG: u64 = 0xFA4F_0000_0000;
const TAG_MASK: u64 = 0xFFFF_0000_0000;

fn sample_handle(id: u64) -> nvmlGpmSample_t {
    (SAMPLE_TAG | id) as usize as nvmlGpmSample_t
}

fn sample_id(h: nvmlGpmSample_t) -> NvResult<u64> {
    let v = h as usize as u64;
    if v & TAG_MASK != SAMPLE_TAG {
        return Err(INVALID_ARGUMENT);
    }
    Ok(v & !TAG_MASK)
}

/// GPM calls take the parent GPU; MIG handles are an invalid argument.
fn gpm_gpu<'a>(ctx: &'a Ctx) -> NvResult<&'a crate::devices::GpuDef> {
    if ctx.dev()?.mig.is_some() {
        return Err(INVALID_ARGUMENT);
    }
    let gpu = ctx.gpu()?;
    if !gpu.sku.gpm {
        return Err(NOT_SUPPORTED);
    }
    Ok(gpu)
}

/// # Safety
/// `support` must be null or writable.
#[no_mangle]
pub unsafe extern "C" fn nvmlGpmQueryDeviceSupport(
    device: nvmlDevice_t,
    support: *mut nvmlGpmSupport_t,
) -> nvmlReturn_t {
    entry("nvmlGpmQueryDeviceSupport", Target::Device(device), |ctx| {
        let dst = out(support)?;
        if dst.version != NVML_GPM_SUPPORT_VERSION {
            return Err(VERSION_MISMATCH);
        }
        dst.isSupportedDevice = ctx.gpu()?.sku.gpm as c_uint;
        Ok(())
    })
}

/// # Safety
/// `sample` must be null or writable.
#[no_mangle]
pub unsafe extern "C" fn nvmlGpmSampleAlloc(sample: *mut nvmlGpmSample_t) -> nvmlReturn_t {
    entry("nvmlGpmSampleAlloc", Target::None, |ctx| {
        let dst = out(sample)?;
        let id = next_id();
        ctx.rt.gpm_samples.insert(id, None);
        *dst = sample_handle(id);
        Ok(())
    })
}

#[no_mangle]
pub extern "C" fn nvmlGpmSampleFree(sample: nvmlGpmSample_t) -> nvmlReturn_t {
    entry("nvmlGpmSampleFree", Target::None, |ctx| {
        let id = sample_id(sample)?;
        ctx.rt
            .gpm_samples
            .remove(&id)
            .map(|_| ())
            .ok_or(INVALID_ARGUMENT)
    })
}

fn record(ctx: &mut Ctx, sample: nvmlGpmSample_t, rec: GpmSampleRec) -> NvResult {
    let id = sample_id(sample)?;
    let slot = ctx.rt.gpm_samples.get_mut(&id).ok_or(INVALID_ARGUMENT)?;
    *slot = Some(rec);
    Ok(())
}

#[no_mangle]
pub extern "C" fn nvmlGpmSampleGet(device: nvmlDevice_t, sample: nvmlGpmSample_t) -> nvmlReturn_t {
    entry("nvmlGpmSampleGet", Target::Device(device), |ctx| {
        let gpu = gpm_gpu(ctx)?.index;
        let t_ms = ctx.t_ms;
        record(
            ctx,
            sample,
            GpmSampleRec {
                gpu,
                instance: None,
                t_ms,
            },
        )
    })
}

#[no_mangle]
pub extern "C" fn nvmlGpmMigSampleGet(
    device: nvmlDevice_t,
    gpu_instance_id: c_uint,
    sample: nvmlGpmSample_t,
) -> nvmlReturn_t {
    entry("nvmlGpmMigSampleGet", Target::Device(device), |ctx| {
        let gpu = gpm_gpu(ctx)?;
        let instances = gpu.mig.as_ref().ok_or(INVALID_ARGUMENT)?;
        let layout = &ctx.world.phase(ctx.phase).mig[gpu.index];
        let instance = layout
            .listed
            .iter()
            .copied()
            .find(|&slot| instances[slot].gpu_instance_id == gpu_instance_id)
            .ok_or(INVALID_ARGUMENT)?;
        let rec = GpmSampleRec {
            gpu: gpu.index,
            instance: Some(instance),
            t_ms: ctx.t_ms,
        };
        record(ctx, sample, rec)
    })
}

/// How one metric id is answered.
enum Metric {
    Value(
        fn(&GpmValues) -> f64,
        &'static CStr,
        &'static CStr,
        &'static CStr,
    ),
    PcieTx,
    PcieRx,
    /// Engines and links the scenarios do not model: reported idle.
    Zero,
    NotSupported,
    Invalid,
}

fn metric(id: c_uint) -> Metric {
    use Metric::*;
    match id {
        1 => Value(
            |g| g.graphics,
            c"gr_util",
            c"Graphics engine utilization",
            c"%",
        ),
        2 => Value(|g| g.sm, c"sm_util", c"SM utilization", c"%"),
        3 => Value(|g| g.occupancy, c"sm_occupancy", c"SM occupancy", c"%"),
        4 => Value(
            |g| g.integer,
            c"integer_util",
            c"Integer pipe utilization",
            c"%",
        ),
        5 => Value(
            |g| g.tensor,
            c"any_tensor_util",
            c"Any tensor pipe utilization",
            c"%",
        ),
        6 => Value(
            |g| g.dfma,
            c"dfma_tensor_util",
            c"DFMA tensor pipe utilization",
            c"%",
        ),
        7 => Value(
            |g| g.hmma,
            c"hmma_tensor_util",
            c"HMMA tensor pipe utilization",
            c"%",
        ),
        9 => Value(
            |g| g.imma,
            c"imma_tensor_util",
            c"IMMA tensor pipe utilization",
            c"%",
        ),
        10 => Value(
            |g| g.dram,
            c"dram_bw_util",
            c"DRAM bandwidth utilization",
            c"%",
        ),
        11 => Value(|g| g.fp64, c"fp64_util", c"FP64 pipe utilization", c"%"),
        12 => Value(|g| g.fp32, c"fp32_util", c"FP32 pipe utilization", c"%"),
        13 => Value(|g| g.fp16, c"fp16_util", c"FP16 pipe utilization", c"%"),
        20 => PcieTx,
        21 => PcieRx,
        30..=37 | 40..=47 | 50 | 51 | 60..=97 => Zero,
        // C2C links exist only on Grace Hopper; the rest is newer than these SKUs.
        100..=209 => NotSupported,
        _ => Invalid,
    }
}

fn cstr_field(s: &'static CStr) -> *mut c_char {
    s.as_ptr() as *mut c_char
}

/// # Safety
/// `req` must be null or a writable nvmlGpmMetricsGet_t.
#[no_mangle]
pub unsafe extern "C" fn nvmlGpmMetricsGet(req: *mut nvmlGpmMetricsGet_t) -> nvmlReturn_t {
    entry("nvmlGpmMetricsGet", Target::None, |ctx| {
        let req = out(req)?;
        if req.version != NVML_GPM_METRICS_GET_VERSION {
            return Err(VERSION_MISMATCH);
        }
        if req.numMetrics as usize > req.metrics.len() {
            return Err(INVALID_ARGUMENT);
        }
        let get = |h| -> NvResult<GpmSampleRec> {
            let id = sample_id(h)?;
            ctx.rt
                .gpm_samples
                .get(&id)
                .cloned()
                .flatten()
                .ok_or(INVALID_ARGUMENT)
        };
        let (s1, s2) = (get(req.sample1)?, get(req.sample2)?);
        if s1.gpu != s2.gpu || s1.instance != s2.instance {
            return Err(INVALID_ARGUMENT);
        }
        let world = &ctx.world;
        if world.phase(ctx.phase).gpus[s1.gpu].lost {
            return Err(GPU_IS_LOST);
        }
        let (g, inst) = (s1.gpu, s1.instance);
        let gpm_at = |p: usize| -> &GpmValues {
            let act = &world.phase(p).gpus[g];
            match inst {
                Some(i) => &act.mig[i].gpm,
                None => &act.gpm,
            }
        };
        let avg = |f: &dyn Fn(usize) -> f64| world.timeline.average(s1.t_ms, s2.t_ms, f);
        for m in req.metrics.iter_mut().take(req.numMetrics as usize) {
            m.metricInfo.shortName = std::ptr::null_mut();
            m.metricInfo.longName = std::ptr::null_mut();
            m.metricInfo.unit = std::ptr::null_mut();
            m.value = 0.0;
            m.nvmlReturn = SUCCESS;
            match metric(m.metricId) {
                Metric::Value(field, short, long, unit) => {
                    m.value = avg(&|p| field(gpm_at(p)));
                    m.metricInfo.shortName = cstr_field(short);
                    m.metricInfo.longName = cstr_field(long);
                    m.metricInfo.unit = cstr_field(unit);
                }
                // MiB/s; GPU-wide traffic is not attributed to MIG instances.
                Metric::PcieTx if inst.is_none() => {
                    m.value = avg(&|p| world.phase(p).gpus[g].pcie_tx_kbps as f64 / 1024.0)
                }
                Metric::PcieRx if inst.is_none() => {
                    m.value = avg(&|p| world.phase(p).gpus[g].pcie_rx_kbps as f64 / 1024.0)
                }
                Metric::PcieTx | Metric::PcieRx | Metric::Zero => {}
                Metric::NotSupported => m.nvmlReturn = NOT_SUPPORTED,
                Metric::Invalid => m.nvmlReturn = INVALID_ARGUMENT,
            }
        }
        Ok(())
    })
}

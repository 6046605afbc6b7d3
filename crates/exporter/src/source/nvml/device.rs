//! Per-GPU figures.

use nvml_wrapper::enum_wrappers::device::{
    Clock, ComputeMode as NvmlComputeMode, EccCounter, GpuVirtualizationMode, MemoryError,
    TemperatureSensor,
};
use nvml_wrapper::enums::gpm::GpmMetricId;
use nvml_wrapper::error::NvmlError;
use nvml_wrapper::gpm::{gpm_metrics_get, GpmSample};
use nvml_wrapper::{Device, Nvml};

use super::gate::{self, GpmSlot};
use super::ledger::{CallLedger, Outcome};
use super::utilization::Cadence;
use super::GpuState;
use std::os::raw::c_uint;

use crate::model::{ComputeMode, GpmActivity, GpmStatus, GpuSample, MemoryBytes, RemappedRows};

/// NVML's `NVML_GPU_INSTANCE_PROFILE_7_SLICE`: the full-GPU profile tells how many compute
/// slices the GPU has.
const FULL_GPU_INSTANCE_PROFILE: u32 =
    nvml_wrapper_sys::bindings::NVML_GPU_INSTANCE_PROFILE_7_SLICE;

/// The first four feed tessera's own families and decide whether GPM answered; the rest feed
/// `--metrics.dcgm-compat` and are absent one by one when a GPU does not answer them.
const GPM_METRICS: [GpmMetricId; 12] = [
    GpmMetricId::SmUtil,
    GpmMetricId::SmOccupancy,
    GpmMetricId::AnyTensorUtil,
    GpmMetricId::DramBwUtil,
    GpmMetricId::GraphicsUtil,
    GpmMetricId::Fp64Util,
    GpmMetricId::Fp32Util,
    GpmMetricId::Fp16Util,
    GpmMetricId::PcieTxPerSec,
    GpmMetricId::PcieRxPerSec,
    GpmMetricId::NvlinkTotalTxPerSec,
    GpmMetricId::NvlinkTotalRxPerSec,
];
const CORE_GPM_METRICS: usize = 4;
const MIB: f64 = 1024.0 * 1024.0;

/// GPM works on pairs of samples; the previous one is kept between cycles.
#[derive(Default)]
pub struct GpmState {
    pub previous: GpmSlot,
    /// When a quiet GPU was last sampled, and what that gave: it stands until the next.
    read_at: Option<std::time::Instant>,
    last: (Option<GpmActivity>, Option<GpmStatus>),
}

pub fn identity(ledger: &mut CallLedger, key: &str, index: u32, d: &Device<'static>) -> GpuSample {
    GpuSample {
        index,
        uuid: ledger
            .call(key, "uuid", || d.uuid())
            .ok()
            .unwrap_or_default(),
        model: ledger
            .call(key, "name", || d.name())
            .ok()
            .unwrap_or_default(),
        pci_bus_id: ledger
            .call(key, "pci_info", || d.pci_info())
            .ok()
            .map(|p| p.bus_id)
            .unwrap_or_default(),
        minor_number: ledger.call(key, "minor_number", || d.minor_number()).ok(),
        vgpu_guest: matches!(
            ledger.call(key, "virtualization_mode", || d.virtualization_mode()),
            Outcome::Value(GpuVirtualizationMode::Vgpu)
        ),
        ..Default::default()
    }
}

/// The identity part of a sample: what a GPU keeps while it is down.
pub fn identity_of(s: &GpuSample) -> GpuSample {
    GpuSample {
        index: s.index,
        uuid: s.uuid.clone(),
        model: s.model.clone(),
        pci_bus_id: s.pci_bus_id.clone(),
        minor_number: s.minor_number,
        vgpu_guest: s.vgpu_guest,
        ..Default::default()
    }
}

/// The series a GPU keeps while it is down: identity and `up = 0`.
pub fn down(identity: &GpuSample) -> GpuSample {
    GpuSample {
        up: false,
        ..identity.clone()
    }
}

fn ratio(percent: u32) -> f64 {
    f64::from(percent) / 100.0
}

fn compute_mode(m: NvmlComputeMode) -> ComputeMode {
    match m {
        NvmlComputeMode::Default => ComputeMode::Default,
        NvmlComputeMode::ExclusiveThread => ComputeMode::ExclusiveThread,
        NvmlComputeMode::Prohibited => ComputeMode::Prohibited,
        NvmlComputeMode::ExclusiveProcess => ComputeMode::ExclusiveProcess,
    }
}

/// GPM reports percentages as doubles whose last digits are noise; 0.1 % steps keep more than
/// NVML's own whole-percent utilization and make the exposition stable.
fn ratio_from_percent(percent: f64) -> f64 {
    ((percent / 100.0).clamp(0.0, 1.0) * 1_000.0).round() / 1_000.0
}

/// Why GPM gave no figures this sample.
#[derive(Debug)]
pub enum GpmError {
    /// Taking the sample or computing the metrics failed.
    Call(NvmlError),
    /// The call succeeded but NVML refused a core metric; the reason is that metric's error.
    Metric(NvmlError),
}

/// A short label for an NVML error, for `gpu_gpm_available{reason}`.
pub fn error_reason(e: &NvmlError) -> String {
    let debug = format!("{e:?}");
    let name = debug.split('(').next().unwrap_or("unknown");
    let mut out = String::new();
    for (i, c) in name.chars().enumerate() {
        if c.is_ascii_uppercase() && i > 0 {
            out.push('_');
        }
        out.push(c.to_ascii_lowercase());
    }
    out
}

/// GPM needs two samples; returns the activity between the previous one and now (`None` on the
/// first sample), taking the sample as call `call`. A metric NVML refuses is absent, never 0.
pub fn gpm_between(
    ledger: &mut CallLedger,
    call: &'static str,
    nvml: &'static Nvml,
    previous: &mut Option<GpmSample<'static>>,
    take: impl FnOnce() -> Result<GpmSample<'static>, NvmlError>,
) -> Result<Option<GpmActivity>, GpmError> {
    let current = ledger.timed(call, take).map_err(GpmError::Call)?;
    let Some(prev) = previous.replace(current) else {
        return Ok(None);
    };
    let Some(current) = previous.as_ref() else {
        return Ok(None);
    };
    let mut results = ledger
        .timed("gpm_metrics_get", || {
            gpm_metrics_get(nvml, &prev, current, &GPM_METRICS)
        })
        .map_err(GpmError::Call)?;
    let value = |i: usize| -> Option<f64> {
        results
            .get(i)
            .and_then(|r| r.as_ref().ok())
            .map(|r| r.value)
            .filter(|v| v.is_finite())
    };
    let percent = |i: usize| value(i).map(ratio_from_percent);
    let mib_per_second = |i: usize| value(i).map(|v| (v.max(0.0) * MIB).round());
    let mut core = [0.0; CORE_GPM_METRICS];
    for (i, slot) in core.iter_mut().enumerate() {
        match percent(i) {
            Some(v) => *slot = v,
            None => {
                let e = results
                    .get_mut(i)
                    .map(|r| std::mem::replace(r, Err(NvmlError::Unknown)))
                    .and_then(Result::err)
                    .unwrap_or(NvmlError::Unknown);
                return Err(GpmError::Metric(e));
            }
        }
    }
    Ok(Some(GpmActivity {
        sm_activity: core[0],
        sm_occupancy: core[1],
        tensor_activity: core[2],
        dram_bandwidth: core[3],
        graphics_activity: percent(4),
        fp64_activity: percent(5),
        fp32_activity: percent(6),
        fp16_activity: percent(7),
        pcie_tx_bytes_per_second: mib_per_second(8),
        pcie_rx_bytes_per_second: mib_per_second(9),
        nvlink_tx_bytes_per_second: mib_per_second(10),
        nvlink_rx_bytes_per_second: mib_per_second(11),
    }))
}

/// Samples GPM through `take`, recording why it gave nothing: GPM that cannot answer must show
/// as "GPM unavailable", never as an idle GPU. An unsupported answer is not learned for good
/// here, since whatever held the counters may let go.
pub fn gpm_sampled(
    ledger: &mut CallLedger,
    key: &str,
    call: &'static str,
    nvml: &'static Nvml,
    previous: &mut GpmSlot,
    take: impl FnOnce() -> Result<GpmSample<'static>, NvmlError>,
) -> (Option<GpmActivity>, Option<GpmStatus>) {
    let Some(between) = gate::serialized(gate::GATE_WAIT, || {
        gpm_between(ledger, call, nvml, &mut previous.0, take)
    }) else {
        let _: Outcome<()> = ledger.record(key, "gpm_gate", &NvmlError::Timeout);
        return (None, Some(GpmStatus::unavailable(gate::GATE_BUSY.into())));
    };
    match between {
        Ok(Some(a)) => (Some(a), Some(GpmStatus::available())),
        Ok(None) => (None, None),
        Err(GpmError::Call(e)) => {
            if !matches!(e, NvmlError::NotSupported) {
                let _: Outcome<()> = ledger.record(key, call, &e);
            }
            (None, Some(GpmStatus::unavailable(error_reason(&e))))
        }
        Err(GpmError::Metric(e)) => {
            let _: Outcome<()> = ledger.record(key, "gpm_metrics_get", &e);
            (None, Some(GpmStatus::unavailable(error_reason(&e))))
        }
    }
}

pub fn sample_gpu(
    ledger: &mut CallLedger,
    gpu: &mut GpuState,
    slow_due: bool,
    nvml: &'static Nvml,
) -> GpuSample {
    let d = &gpu.handle;
    let key = gpu.key.clone();
    let key = key.as_str();
    let mut s = gpu.identity.clone();

    if slow_due {
        if let Outcome::Value(m) = ledger.call(key, "mig_mode", || d.mig_mode()) {
            let enabled = m.current == 1;
            if gpu.mig_enabled != Some(enabled) && enabled {
                gpu.mig_slices_total = ledger
                    .call(key, "gpu_instance_profile_info", || {
                        d.profile_info(FULL_GPU_INSTANCE_PROFILE)
                    })
                    .ok()
                    .map(|p| p.slice_count);
            }
            gpu.mig_enabled = Some(enabled);
        }
        if let Outcome::Value(mj) = ledger.call(key, "total_energy_consumption", || {
            d.total_energy_consumption()
        }) {
            gpu.energy_joules = Some(mj as f64 / 1000.0);
        }
        // ~120 µs on the H100, for a counter that rarely moves.
        if let Outcome::Value(n) =
            ledger.call(key, "pcie_replay_counter", || d.pcie_replay_counter())
        {
            gpu.pcie_replays = Some(u64::from(n));
        }
        if let Outcome::Value(r) = ledger.call(key, "remapped_rows", || remapped_rows(nvml, d)) {
            gpu.remapped_rows = Some(r);
        }
        // HBM temperature moves slowly; it is a field value, not a plain call.
        if let Outcome::Value(t) = ledger.call(key, "memory_temperature", || memory_temperature(d))
        {
            gpu.memory_temperature_celsius = Some(t);
        }
    }
    s.remapped_rows = gpu.remapped_rows;
    s.memory_temperature_celsius = gpu.memory_temperature_celsius;
    s.mig_enabled = gpu.mig_enabled;
    s.energy_joules = gpu.energy_joules;
    if gpu.mig_enabled == Some(true) {
        s.mig_slices_total = gpu.mig_slices_total;
    }

    s.compute_mode = ledger
        .call(key, "compute_mode", || d.compute_mode())
        .ok()
        .map(compute_mode);
    s.memory = ledger
        .call(key, "memory_info", || d.memory_info())
        .ok()
        .map(|m| MemoryBytes {
            total: m.total,
            used: m.used,
            reserved: m.reserved,
        });
    s.encoder_utilization = ledger
        .call(key, "encoder_utilization", || d.encoder_utilization())
        .ok()
        .map(|u| ratio(u.utilization));
    s.decoder_utilization = ledger
        .call(key, "decoder_utilization", || d.decoder_utilization())
        .ok()
        .map(|u| ratio(u.utilization));
    s.power_watts = ledger
        .call(key, "power_usage", || d.power_usage())
        .ok()
        .map(|mw| f64::from(mw) / 1000.0);
    s.power_limit_watts = ledger
        .call(key, "enforced_power_limit", || d.enforced_power_limit())
        .ok()
        .map(|mw| f64::from(mw) / 1000.0);
    s.temperature_celsius = ledger
        .call(key, "temperature", || d.temperature(TemperatureSensor::Gpu))
        .ok()
        .map(f64::from);
    s.sm_clock_hertz = ledger
        .call(key, "clock_info_sm", || d.clock_info(Clock::SM))
        .ok()
        .map(|mhz| f64::from(mhz) * 1e6);
    s.memory_clock_hertz = ledger
        .call(key, "clock_info_memory", || d.clock_info(Clock::Memory))
        .ok()
        .map(|mhz| f64::from(mhz) * 1e6);
    s.clock_event_reasons = ledger
        .call(key, "clocks_event_reasons", || clock_event_reasons(nvml, d))
        .ok();
    s.ecc_corrected = ledger
        .call(key, "total_ecc_errors", || {
            d.total_ecc_errors(MemoryError::Corrected, EccCounter::Volatile)
        })
        .ok();
    s.ecc_uncorrected = ledger
        .call(key, "total_ecc_errors", || {
            d.total_ecc_errors(MemoryError::Uncorrected, EccCounter::Volatile)
        })
        .ok();
    s.pcie_replays = gpu.pcie_replays;

    s.up = !ledger.is_lost(key);
    s
}

/// What the GPU's engines did since the last read: utilization from the sample buffers, GPM's
/// activity. Read after the process list, which decides the cadence (see `utilization`): a
/// quiet GPU keeps its last window's figures between reads, which GPM's window covers too.
pub fn sample_activity(
    ledger: &mut CallLedger,
    gpu: &mut GpuState,
    s: &mut GpuSample,
    nvml: &'static Nvml,
    cadence: &Cadence,
) {
    let d = &gpu.handle;
    let key = gpu.key.as_str();
    if gpu.mig_enabled != Some(true) {
        // On MIG GPUs NVML refuses device-wide utilization; GPM per instance replaces it.
        // Elsewhere the mean of every sample since the last read, the snapshot where none.
        let (gpu_mean, memory_mean) =
            super::utilization::read_means(ledger, key, d, &mut gpu.utilization, cadence);
        if gpu_mean.is_none() || memory_mean.is_none() {
            if let Some(u) = ledger
                .call(key, "utilization_rates", || d.utilization_rates())
                .ok()
            {
                s.utilization = Some(ratio(u.gpu));
                s.memory_utilization = Some(ratio(u.memory));
            }
        }
        s.utilization = gpu_mean.or(s.utilization);
        s.memory_utilization = memory_mean.or(s.memory_utilization);
    }
    if !gpu.collect_gpm {
        s.gpm_status = Some(GpmStatus::unavailable("disabled".into()));
    } else if gpu.gpm.is_none() {
        let support = ledger.call(key, "gpm_support", || d.gpm_support());
        if matches!(support, Outcome::Value(false) | Outcome::Unsupported) {
            s.gpm_status = Some(GpmStatus::unavailable("not_supported".into()));
        }
        gpu.gpm = matches!(support, Outcome::Value(true)).then(GpmState::default);
    }
    if let Some(gpm) = gpu.gpm.as_mut() {
        let due = cadence.busy
            || gpm.read_at.is_none_or(|t| {
                cadence.now.duration_since(t) >= super::utilization::QUIET_READ_INTERVAL
            });
        if due {
            gpm.read_at = Some(cadence.now);
            gpm.last = gpm_sampled(ledger, key, "gpm_sample", nvml, &mut gpm.previous, || {
                d.gpm_sample()
            });
        }
        (s.gpm, s.gpm_status) = gpm.last.clone();
    }
    s.up = !ledger.is_lost(key);
}

/// `nvmlDeviceGetCurrentClocksEventReasons` is not wrapped by nvml-wrapper 0.13; its older name
/// (`...ThrottleReasons`) is deprecated, so call the new symbol through the loaded library.
pub fn clock_event_reasons(nvml: &Nvml, d: &Device<'static>) -> Result<u64, NvmlError> {
    let sym = nvml
        .lib()
        .nvmlDeviceGetCurrentClocksEventReasons
        .as_ref()
        .map_err(|e| NvmlError::FailedToLoadSymbol(e.to_string()))?;
    let mut reasons: std::os::raw::c_ulonglong = 0;
    // SAFETY: the handle is valid for the life of `nvml`; the out-pointer is a live local.
    let rc = unsafe { sym(d.handle(), &mut reasons) };
    nvml_wrapper::error::nvml_try(rc)?;
    Ok(reasons)
}

/// `nvmlDeviceGetRemappedRows`, which nvml-wrapper 0.13 does not wrap.
pub fn remapped_rows(nvml: &Nvml, d: &Device<'static>) -> Result<RemappedRows, NvmlError> {
    let sym = nvml
        .lib()
        .nvmlDeviceGetRemappedRows
        .as_ref()
        .map_err(|e| NvmlError::FailedToLoadSymbol(e.to_string()))?;
    let (mut corr, mut unc, mut pending, mut failed): (c_uint, c_uint, c_uint, c_uint) =
        (0, 0, 0, 0);
    // SAFETY: the handle is valid for the life of `nvml`; the out-pointers are live locals.
    let rc = unsafe { sym(d.handle(), &mut corr, &mut unc, &mut pending, &mut failed) };
    nvml_wrapper::error::nvml_try(rc)?;
    Ok(RemappedRows {
        correctable: u64::from(corr),
        uncorrectable: u64::from(unc),
        pending: pending != 0,
        failed: failed != 0,
    })
}

/// NVML_FI_DEV_MEMORY_TEMP: the HBM's temperature, where the GPU reports one.
fn memory_temperature(d: &Device<'static>) -> Result<f64, NvmlError> {
    let field = nvml_wrapper::structs::device::FieldId(MEMORY_TEMP_FIELD);
    let mut values = d.field_values_for(&[field])?;
    let sample = values.pop().ok_or(NvmlError::NotSupported)??;
    match sample.value? {
        nvml_wrapper::enums::device::SampleValue::U32(v) => Ok(f64::from(v)),
        nvml_wrapper::enums::device::SampleValue::U64(v) => Ok(v as f64),
        nvml_wrapper::enums::device::SampleValue::I64(v) => Ok(v as f64),
        nvml_wrapper::enums::device::SampleValue::F64(v) => Ok(v),
    }
}

const MEMORY_TEMP_FIELD: u32 = 82;

#[cfg(test)]
#[path = "device_tests.rs"]
mod tests;

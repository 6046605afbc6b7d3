//! Per-GPU figures.

use nvml_wrapper::enum_wrappers::device::{
    Clock, ComputeMode as NvmlComputeMode, EccCounter, GpuVirtualizationMode, MemoryError,
    TemperatureSensor,
};
use nvml_wrapper::enums::gpm::GpmMetricId;
use nvml_wrapper::error::NvmlError;
use nvml_wrapper::gpm::{gpm_metrics_get, GpmSample};
use nvml_wrapper::{Device, Nvml};

use super::ledger::{CallLedger, Outcome};
use super::GpuState;
use crate::model::{ComputeMode, GpmActivity, GpuSample, MemoryBytes};

/// NVML's `NVML_GPU_INSTANCE_PROFILE_7_SLICE`: the full-GPU profile tells how many compute
/// slices the GPU has.
const FULL_GPU_INSTANCE_PROFILE: u32 =
    nvml_wrapper_sys::bindings::NVML_GPU_INSTANCE_PROFILE_7_SLICE;

const GPM_METRICS: [GpmMetricId; 4] = [
    GpmMetricId::SmUtil,
    GpmMetricId::SmOccupancy,
    GpmMetricId::AnyTensorUtil,
    GpmMetricId::DramBwUtil,
];

/// GPM works on pairs of samples; the previous one is kept between cycles.
pub struct GpmState {
    pub previous: Option<GpmSample<'static>>,
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

/// GPM needs two samples; returns the activity between the previous one and now.
pub fn gpm_between(
    nvml: &'static Nvml,
    previous: &mut Option<GpmSample<'static>>,
    take: impl FnOnce() -> Result<GpmSample<'static>, NvmlError>,
) -> Result<Option<GpmActivity>, NvmlError> {
    let current = take()?;
    let activity = match previous.as_ref() {
        Some(prev) => {
            let results = gpm_metrics_get(nvml, prev, &current, &GPM_METRICS)?;
            let value = |i: usize| {
                results
                    .get(i)
                    .and_then(|r| r.as_ref().ok())
                    .map(|r| ratio_from_percent(r.value))
                    .unwrap_or(0.0)
            };
            Some(GpmActivity {
                sm_activity: value(0),
                sm_occupancy: value(1),
                tensor_activity: value(2),
                dram_bandwidth: value(3),
            })
        }
        None => None,
    };
    *previous = Some(current);
    Ok(activity)
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
    }
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
    if gpu.mig_enabled != Some(true) {
        // On MIG GPUs NVML refuses device-wide utilization; GPM per instance replaces it.
        if let Some(u) = ledger
            .call(key, "utilization_rates", || d.utilization_rates())
            .ok()
        {
            s.utilization = Some(ratio(u.gpu));
            s.memory_utilization = Some(ratio(u.memory));
        }
    }
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

    if gpu.gpm.is_none() {
        let supported = matches!(
            ledger.call(key, "gpm_support", || d.gpm_support()),
            Outcome::Value(true)
        );
        gpu.gpm = supported.then_some(GpmState { previous: None });
    }
    if let Some(gpm) = gpu.gpm.as_mut() {
        s.gpm = ledger
            .call(key, "gpm_sample", || {
                gpm_between(nvml, &mut gpm.previous, || d.gpm_sample())
            })
            .ok()
            .flatten();
    }
    s.up = !ledger.is_lost(key);
    s
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

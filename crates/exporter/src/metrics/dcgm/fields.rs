//! The dcgm-exporter field table: every DCGM field tessera serves under `--metrics.dcgm-compat`,
//! with dcgm-exporter's name, type and unit, how tessera sources it, and whether it is split
//! among tenants. docs/metrics.md is generated from it, with the fields tessera cannot source.

/// How a field's device value is handed to the pods on the device (docs/design.md, invariant 7).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Rule {
    /// A quantity the tenants' uses add up to: one series per tenant whose figure tessera knows
    /// and one remainder series with empty pod labels, so `sum by (UUID)` is the device value.
    Additive,
    /// A property of the GPU (a temperature, a clock): once per GPU, with pod labels only when
    /// one pod holds it.
    PerGpu,
}

#[derive(Debug, Clone, Copy)]
pub struct Field {
    /// Position in [`ALL`], so the encoder files a series without hashing the name.
    pub index: usize,
    pub name: &'static str,
    /// The type dcgm-exporter declares (`etc/default-counters.csv`).
    pub dcgm_type: &'static str,
    pub unit: &'static str,
    pub rule: Rule,
    /// Where tessera's value comes from, and the per-tenant figure for additive fields.
    pub source: &'static str,
    pub help: &'static str,
}

macro_rules! fields {
    ($($ident:ident = $name:literal, $ty:literal, $unit:literal, $rule:ident, $source:literal, $help:literal;)*) => {
        #[allow(non_camel_case_types, clippy::upper_case_acronyms)]
        enum Position { $($ident),* }
        $(pub const $ident: Field = Field { index: Position::$ident as usize, name: $name, dcgm_type: $ty, unit: $unit, rule: Rule::$rule, source: $source, help: $help };)*
        pub const ALL: &[Field] = &[$($ident),*];
    };
}

fields! {
    SM_CLOCK = "DCGM_FI_DEV_SM_CLOCK", "gauge", "MHz", PerGpu, "NVML current SM clock (`gpu_clock_hertz{clock=\"sm\"}` / 1e6)", "SM clock frequency (in MHz).";
    MEM_CLOCK = "DCGM_FI_DEV_MEM_CLOCK", "gauge", "MHz", PerGpu, "NVML current memory clock (`gpu_clock_hertz{clock=\"memory\"}` / 1e6)", "Memory clock frequency (in MHz).";
    MEMORY_TEMP = "DCGM_FI_DEV_MEMORY_TEMP", "gauge", "C", PerGpu, "NVML field value NVML_FI_DEV_MEMORY_TEMP (`gpu_temperature_celsius{sensor=\"memory\"}`)", "Memory temperature (in C).";
    GPU_TEMP = "DCGM_FI_DEV_GPU_TEMP", "gauge", "C", PerGpu, "NVML GPU temperature (`gpu_temperature_celsius{sensor=\"gpu\"}`)", "GPU temperature (in C).";
    POWER_USAGE = "DCGM_FI_DEV_POWER_USAGE", "gauge", "W", PerGpu, "NVML power usage (`gpu_power_watts`)", "Power draw (in W).";
    TOTAL_ENERGY = "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION", "counter", "mJ", PerGpu, "NVML total energy consumption, slow cadence (`gpu_energy_joules_total` × 1000)", "Total energy consumption since boot (in mJ).";
    PCIE_REPLAY = "DCGM_FI_DEV_PCIE_REPLAY_COUNTER", "counter", "count", PerGpu, "NVML PCIe replay counter, slow cadence (`gpu_pcie_replays_total`)", "Total number of PCIe retries.";
    GPU_UTIL = "DCGM_FI_DEV_GPU_UTIL", "gauge", "%", Additive, "NVML utilization.gpu (`gpu_utilization_ratio` × 100); tenant: `gpu_container_sm_utilization_ratio` × 100 where every process carries the probe; absent on MIG GPUs, as NVML refuses it there", "GPU utilization (in %).";
    MEM_COPY_UTIL = "DCGM_FI_DEV_MEM_COPY_UTIL", "gauge", "%", Additive, "NVML utilization.memory (`gpu_memory_utilization_ratio` × 100); no per-tenant figure, so on a shared GPU it is all remainder", "Memory utilization (in %).";
    ENC_UTIL = "DCGM_FI_DEV_ENC_UTIL", "gauge", "%", Additive, "NVML encoder utilization (`gpu_encoder_utilization_ratio` × 100), whole GPUs only (NVML's figure is not per MIG instance); no per-tenant figure", "Encoder utilization (in %).";
    DEC_UTIL = "DCGM_FI_DEV_DEC_UTIL", "gauge", "%", Additive, "NVML decoder utilization (`gpu_decoder_utilization_ratio` × 100), whole GPUs only (NVML's figure is not per MIG instance); no per-tenant figure", "Decoder utilization (in %).";
    XID_ERRORS = "DCGM_FI_DEV_XID_ERRORS", "gauge", "xid", PerGpu, "tessera's XID event watcher (`gpu_xid_errors_total` counts them by XID): the most recent XID since tessera started, 0 while none was seen; absent where XID events cannot be watched", "Value of the last XID error encountered.";
    FB_FREE = "DCGM_FI_DEV_FB_FREE", "gauge", "MiB", Additive, "NVML memory info v2: total − used − reserved (per MIG instance on MIG, plus a GPU row for memory outside every instance); tenant and remainder: the device's free memory in proportion to each series' `DCGM_FI_DEV_FB_USED`, so `FB_USED / (FB_USED + FB_FREE)` on any series is the device's occupancy", "Framebuffer memory free (in MiB).";
    FB_USED = "DCGM_FI_DEV_FB_USED", "gauge", "MiB", Additive, "NVML memory info (`gpu_memory_used_bytes`, per MIG instance on MIG, plus a GPU row for memory outside every instance); tenant: `gpu_container_memory_used_bytes`; remainder: driver and contexts outside pods", "Framebuffer memory used (in MiB).";
    FB_RESERVED = "DCGM_FI_DEV_FB_RESERVED", "gauge", "MiB", PerGpu, "NVML memory info v2 (`gpu_memory_reserved_bytes`)", "Framebuffer memory reserved (in MiB).";
    UNCORRECTABLE_REMAPPED_ROWS = "DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS", "counter", "rows", PerGpu, "NVML remapped rows, slow cadence (`gpu_remapped_rows_total{type=\"uncorrectable\"}`)", "Number of remapped rows for uncorrectable errors";
    CORRECTABLE_REMAPPED_ROWS = "DCGM_FI_DEV_CORRECTABLE_REMAPPED_ROWS", "counter", "rows", PerGpu, "NVML remapped rows, slow cadence (`gpu_remapped_rows_total{type=\"correctable\"}`)", "Number of remapped rows for correctable errors";
    ROW_REMAP_FAILURE = "DCGM_FI_DEV_ROW_REMAP_FAILURE", "gauge", "bool", PerGpu, "NVML remapped rows' failure flag (`gpu_row_remap_failure`)", "Whether remapping of rows has failed";
    GR_ENGINE_ACTIVE = "DCGM_FI_PROF_GR_ENGINE_ACTIVE", "gauge", "ratio", Additive, "whole GPU: NVML utilization.gpu (`gpu_utilization_ratio`), the fraction of time a kernel ran, which tessera's per-container shares divide; MIG instance: the instance's GPM SM activity (`gpu_mig_instance_sm_activity_ratio`), what tessera's per-container figures on an instance divide (GPM's graphics-engine figure reads a few % higher); tenant: `gpu_container_sm_utilization_ratio`, where every process on the device carries the CUDA probe", "Ratio of time the graphics engine is active.";
    SM_ACTIVE = "DCGM_FI_PROF_SM_ACTIVE", "gauge", "ratio", Additive, "GPM SM utilization (`gpu_sm_activity_ratio`); no per-tenant figure except on a MIG instance, where it is `gpu_container_sm_utilization_ratio`", "The ratio of cycles an SM has at least 1 warp assigned.";
    SM_OCCUPANCY = "DCGM_FI_PROF_SM_OCCUPANCY", "gauge", "ratio", Additive, "GPM SM occupancy (`gpu_sm_occupancy_ratio`); no per-tenant figure", "The ratio of number of warps resident on an SM.";
    PIPE_TENSOR_ACTIVE = "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE", "gauge", "ratio", Additive, "GPM any-tensor utilization (`gpu_tensor_activity_ratio`); no per-tenant figure", "Ratio of cycles the tensor (HMMA) pipe is active.";
    DRAM_ACTIVE = "DCGM_FI_PROF_DRAM_ACTIVE", "gauge", "ratio", Additive, "GPM DRAM bandwidth utilization (`gpu_dram_bandwidth_utilization_ratio`); no per-tenant figure", "Ratio of cycles the device memory interface is active sending or receiving data.";
    PIPE_FP64_ACTIVE = "DCGM_FI_PROF_PIPE_FP64_ACTIVE", "gauge", "ratio", Additive, "GPM FP64 utilization; no per-tenant figure", "Ratio of cycles the fp64 pipes are active.";
    PIPE_FP32_ACTIVE = "DCGM_FI_PROF_PIPE_FP32_ACTIVE", "gauge", "ratio", Additive, "GPM FP32 utilization; no per-tenant figure", "Ratio of cycles the fp32 pipes are active.";
    PIPE_FP16_ACTIVE = "DCGM_FI_PROF_PIPE_FP16_ACTIVE", "gauge", "ratio", Additive, "GPM FP16 utilization; no per-tenant figure", "Ratio of cycles the fp16 pipes are active.";
    PCIE_TX_BYTES = "DCGM_FI_PROF_PCIE_TX_BYTES", "gauge", "B/s", Additive, "GPM PCIe TX (MiB/s × 1048576), whole GPU only; no per-tenant figure", "The rate of data transmitted over the PCIe bus - including both protocol headers and data payloads - in bytes per second.";
    PCIE_RX_BYTES = "DCGM_FI_PROF_PCIE_RX_BYTES", "gauge", "B/s", Additive, "GPM PCIe RX (MiB/s × 1048576), whole GPU only; no per-tenant figure", "The rate of data received over the PCIe bus - including both protocol headers and data payloads - in bytes per second.";
    NVLINK_TX_BYTES = "DCGM_FI_PROF_NVLINK_TX_BYTES", "gauge", "B/s", Additive, "GPM NVLink total TX (MiB/s × 1048576), whole GPU only, where the GPU answers it; no per-tenant figure", "The rate of data transmitted over NVLink, not including protocol headers, in bytes per second.";
    NVLINK_RX_BYTES = "DCGM_FI_PROF_NVLINK_RX_BYTES", "gauge", "B/s", Additive, "GPM NVLink total RX (MiB/s × 1048576), whole GPU only, where the GPU answers it; no per-tenant figure", "The rate of data received over NVLink, not including protocol headers, in bytes per second.";
}

/// Fields of dcgm-exporter's default set that tessera does not serve, and why: absent, never 0.
pub const ABSENT: &[(&str, &str)] = &[
    ("DCGM_FI_DEV_NVLINK_BANDWIDTH_TOTAL", "a DCGM sum of NVLink bandwidth counters that NVML does not expose as one figure; `DCGM_FI_PROF_NVLINK_TX_BYTES`/`RX_BYTES` carry the traffic where GPM answers"),
    ("DCGM_FI_DEV_VGPU_LICENSE_STATUS", "vGPU licensing is a host (vGPU manager) matter tessera does not read"),
];

#[cfg(test)]
#[path = "fields_tests.rs"]
mod tests;

//! Plain data: what the sources saw and what the exporter shows. No I/O, no NVML or Prometheus
//! types, so every attribution rule can be tested without a GPU.
//!
//! The model reads in wings, bottom-up; a file imports only from its own wing and those below
//! it, and within a wing only files below it (`tests/e2e/layers/` fails on an import that
//! runs back up, or on a circle):
//! - the samples (this file);
//! - `inputs/`: `sharing`, `fractional`, `device_id`, `identity`, `allocations`, and `inputs`
//!   itself, which only declares them;
//! - `dra/`: `dra_claim` (plain types), `dra_parse`, then `dra` itself (`dra/mod.rs`);
//! - `cluster`, the pods' view;
//! - `holding/`, who holds what: `holding` itself (plain types), `grants`, `attribution`;
//! - `compute/`: `figures` (plain types), `sampling`, `timeslice`, `split_types`,
//!   `probe_split`, then `compute` itself, `evidence`, and `records` (which probes need kernel
//!   records);
//! - `energy/`: `floor`, `energy` itself (plain types, and the floor's re-exported), `split`,
//!   `ledger`;
//! - `view/`, what the exporter shows: `view` itself (plain types), filled by `limits` and
//!   `billing`;
//! - `join/`, which runs them all: `device`, one device's pipeline, `energy_step`, the
//!   energy split once every GPU is built, then `join` itself;
//!   `testkit` (tests only) builds its inputs.

pub mod cluster;
pub mod compute;
pub mod dra;
pub mod energy;
pub mod holding;
pub mod inputs;
pub mod join;
pub mod view;

#[cfg(test)]
pub use join::testkit;

// The wings' files by their names before the wings, as the rest of the crate reads them.
pub use compute::{evidence, figures, records, timeslice};
pub use dra::dra_claim;
pub use holding::{attribution, grants};
pub use inputs::{allocations, device_id, fractional, identity, sharing};
pub use view::{billing, limits};

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// One NVML sample of the whole node.
#[derive(Debug, Clone, Default)]
pub struct NvmlSample {
    pub driver_version: String,
    pub gpus: Vec<GpuSample>,
    /// Failures per NVML call since start; calls a device does not support are not failures.
    pub errors_by_call: BTreeMap<&'static str, u64>,
    /// Restarts of NVML worker processes since start: (worker — `node` or a GPU's UUID —,
    /// reason, count).
    pub worker_restarts: Vec<(String, &'static str, u64)>,
    /// What each NVML call has cost since start, summed over GPUs and worker lives.
    pub call_costs: BTreeMap<&'static str, CallCost>,
    /// Whether the last cycle completed without a failing call.
    pub success: bool,
    pub duration_seconds: f64,
}

/// What one NVML call has cost, summed: how often it was made, the CPU time (user and system)
/// of the thread that made it, and the wall-clock time it took.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct CallCost {
    pub calls: u64,
    pub cpu_ns: u64,
    pub wall_ns: u64,
}

impl std::ops::AddAssign for CallCost {
    fn add_assign(&mut self, other: CallCost) {
        self.calls += other.calls;
        self.cpu_ns += other.cpu_ns;
        self.wall_ns += other.wall_ns;
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub enum ComputeMode {
    Default,
    ExclusiveThread,
    Prohibited,
    ExclusiveProcess,
}

impl ComputeMode {
    pub fn as_label(self) -> &'static str {
        match self {
            ComputeMode::Default => "default",
            ComputeMode::ExclusiveThread => "exclusive_thread",
            ComputeMode::Prohibited => "prohibited",
            ComputeMode::ExclusiveProcess => "exclusive_process",
        }
    }
}

/// GPM activity, each a fraction in 0..=1.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct GpmActivity {
    pub sm_activity: f64,
    pub sm_occupancy: f64,
    pub tensor_activity: f64,
    pub dram_bandwidth: f64,
    /// Fields read for `--metrics.dcgm-compat`; `None` when the GPU did not answer the metric.
    pub graphics_activity: Option<f64>,
    pub fp64_activity: Option<f64>,
    pub fp32_activity: Option<f64>,
    pub fp16_activity: Option<f64>,
    /// Whole GPU only: NVML does not attribute bus traffic to MIG instances.
    pub pcie_tx_bytes_per_second: Option<f64>,
    pub pcie_rx_bytes_per_second: Option<f64>,
    pub nvlink_tx_bytes_per_second: Option<f64>,
    pub nvlink_rx_bytes_per_second: Option<f64>,
}

/// Whether GPM answered for a GPU this sample, and if not, why (an unsupported GPU, a failing
/// call, a metric NVML refuses): never shown as an idle GPU.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct GpmStatus {
    pub available: bool,
    /// Empty when available; else `not_supported` or NVML's error (`in_use`, `no_permission`...).
    pub reason: String,
}

impl GpmStatus {
    pub fn available() -> Self {
        Self {
            available: true,
            reason: String::new(),
        }
    }

    pub fn unavailable(reason: String) -> Self {
        Self {
            available: false,
            reason,
        }
    }
}

/// HBM rows remapped to spares since manufacture (persistent), and the remapper's state.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct RemappedRows {
    pub correctable: u64,
    pub uncorrectable: u64,
    /// A remapping waits for the next GPU reset.
    pub pending: bool,
    pub failed: bool,
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct MemoryBytes {
    pub total: u64,
    pub used: u64,
    pub reserved: u64,
}

/// Clock-event (throttle) reasons, in NVML's bit order.
pub const CLOCK_EVENT_REASONS: [(u64, &str); 9] = [
    (0x1, "gpu_idle"),
    (0x2, "applications_clocks_setting"),
    (0x4, "sw_power_cap"),
    (0x8, "hw_slowdown"),
    (0x10, "sync_boost"),
    (0x20, "sw_thermal_slowdown"),
    (0x40, "hw_thermal_slowdown"),
    (0x80, "hw_power_brake_slowdown"),
    (0x100, "display_clock_setting"),
];

/// The reasons that slow a GPU against its users' will (power cap, thermal and hardware
/// slowdowns, power brake): what the alerts read. The others (idle, an application's or the
/// display's clock setting, sync boost) only inform.
pub const CLOCK_SLOWDOWN_REASONS: u64 = 0x4 | 0x8 | 0x20 | 0x40 | 0x80;

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct GpuSample {
    pub index: u32,
    pub uuid: String,
    pub model: String,
    pub pci_bus_id: String,
    /// `/dev/nvidiaN`; GKE's device plugin names GPUs by it (`nvidiaN`).
    pub minor_number: Option<u32>,
    /// False when the GPU is lost or NVML fails for it; the figures below are then absent.
    pub up: bool,
    /// Why the GPU is down, where tessera knows (its NVML worker died, a call timed out).
    #[serde(default)]
    pub down_reason: Option<String>,
    pub mig_enabled: Option<bool>,
    pub compute_mode: Option<ComputeMode>,
    /// NVML reports a vGPU guest.
    pub vgpu_guest: bool,
    pub memory: Option<MemoryBytes>,
    /// NVML's coarse "a kernel ran" fractions.
    pub utilization: Option<f64>,
    pub memory_utilization: Option<f64>,
    pub gpm: Option<GpmActivity>,
    /// `None` before GPM's first pair of samples, or when tessera cannot tell.
    pub gpm_status: Option<GpmStatus>,
    pub power_watts: Option<f64>,
    pub power_limit_watts: Option<f64>,
    pub energy_joules: Option<f64>,
    pub temperature_celsius: Option<f64>,
    pub memory_temperature_celsius: Option<f64>,
    pub sm_clock_hertz: Option<f64>,
    pub memory_clock_hertz: Option<f64>,
    pub clock_event_reasons: Option<u64>,
    pub ecc_corrected: Option<u64>,
    pub ecc_uncorrected: Option<u64>,
    pub pcie_replays: Option<u64>,
    /// Video engine utilization, 0..=1.
    pub encoder_utilization: Option<f64>,
    pub decoder_utilization: Option<f64>,
    /// NVML's remapped rows (read on the slow cadence).
    pub remapped_rows: Option<RemappedRows>,
    /// XID errors seen since start, by XID.
    pub xid_counts: BTreeMap<u32, u64>,
    /// The most recent XID since start.
    pub last_xid: Option<u32>,
    /// Whether XID events are watched on this GPU (else no XID could have been seen).
    pub xid_watched: bool,
    /// Compute slices the GPU offers under MIG (7 on A100/H100).
    pub mig_slices_total: Option<u32>,
    pub mig_instances: Vec<MigSample>,
    pub processes: Vec<ProcessSample>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct MigSample {
    pub uuid: String,
    pub gpu_instance_id: u32,
    pub compute_instance_id: u32,
    /// e.g. `1g.10gb`, as NVML names it.
    pub profile: String,
    pub slices: u32,
    pub memory: Option<MemoryBytes>,
    pub gpm: Option<GpmActivity>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ProcessKind {
    Compute,
    Graphics,
    MpsClient,
    MpsServer,
}

impl ProcessKind {
    pub fn as_label(self) -> &'static str {
        match self {
            ProcessKind::Compute => "compute",
            ProcessKind::Graphics => "graphics",
            ProcessKind::MpsClient => "mps_client",
            ProcessKind::MpsServer => "mps_server",
        }
    }
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ProcessSample {
    pub pid: u32,
    pub name: String,
    pub kind: Option<ProcessKind>,
    pub memory_used_bytes: Option<u64>,
    /// Averages of NVML process-utilization samples since the previous cycle, 0..=1.
    pub sm_utilization: Option<f64>,
    pub memory_utilization: Option<f64>,
    /// The MIG instance the process runs in.
    pub mig_uuid: Option<String>,
}

pub use sharing::SharingMode;
pub use view::{CollectorStatus, Snapshot};

//! What the exporter shows: the snapshot of one sample, per GPU, MIG instance, container,
//! process and pod. Plain data, built by the join and filled by limits and billing; the
//! encoders and the debug pages read it.

pub mod billing;
pub mod limits;

use std::collections::BTreeMap;
use std::sync::Arc;

use serde::Serialize;

use super::attribution::AttributionStats;
use super::compute::{Activity, DeviceSplit, ProcessShare, SplitMethod};
use super::energy::{ContainerEnergy, GpuEnergy};
use super::figures::DisputeReason;
use super::holding::{Holding, PodRef};
use super::sharing::{SharingEvidence, SharingMode};
use super::{CallCost, GpmStatus, GpuSample, MigSample, ProcessSample};

/// Health of one collector, as the sampler saw it this cycle.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CollectorStatus {
    pub name: &'static str,
    pub success: bool,
    pub duration_seconds: f64,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ProcessView {
    #[serde(flatten)]
    pub sample: ProcessSample,
    pub pod: Option<Arc<PodRef>>,
    /// The share tessera publishes, decided by [`super::compute::split`]; `sample` keeps NVML's raw word.
    pub compute: ProcessShare,
    /// Cumulative kernel busy seconds and kernels the CUDA probe reported, when it runs.
    pub probe_busy_seconds: Option<f64>,
    pub probe_kernels: Option<u64>,
    /// The share of the window its probe traced, when it traced in duty cycles: its figure
    /// and bounds are then read from that sample, over the timelines' window (2 s behind).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub probe_traced_share: Option<f64>,
}

/// One container's hold on, and use of, one device (a GPU or a MIG instance).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ContainerUse {
    pub pod: Arc<PodRef>,
    pub mig_uuid: Option<String>,
    pub sharing_mode: SharingMode,
    /// Empty when the container runs on the device without an allocation.
    pub allocations: Vec<Holding>,
    pub processes: usize,
    pub memory_used_bytes: u64,
    /// Sum of its processes' shares of device time (on MIG, the instance's activity when it is
    /// the one active holder); `None` when no source can tell (see [`super::compute`]).
    pub sm_utilization: Option<f64>,
    /// The CUDA probe's busy share (normalised under time-slicing), when every process of the
    /// container on the device reports.
    pub busy_ratio: Option<f64>,
    /// What the probes' evidence bounds its share by, (lower, upper), summed over its
    /// processes, when every one of them has bounds or is quiet ([`super::probe_split`]).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub busy_bounds: Option<(f64, f64)>,
    /// Accumulated `busy_ratio` × sample interval.
    pub busy_seconds: f64,
    pub activity: Activity,
    pub idle_seconds: f64,
    /// Seconds held while idleness could not be decided: neither idle nor busy.
    pub unknown_seconds: f64,
    /// Runs processes on a device it was not allocated, while allocations are known.
    pub unallocated_use: bool,
    /// What it may use of the device (filled by `limits::fill_all` once the GPU is built).
    pub limits: Limits,
    /// Energy charged to it on the device, accumulated ([`super::energy`]).
    pub energy: ContainerEnergy,
}

impl ContainerUse {
    /// `pod`'s row on a device before anything is known of its hold or use.
    pub fn blank(pod: Arc<PodRef>, mig_uuid: Option<String>, sharing_mode: SharingMode) -> Self {
        ContainerUse {
            pod,
            mig_uuid,
            sharing_mode,
            allocations: Vec::new(),
            processes: 0,
            memory_used_bytes: 0,
            sm_utilization: None,
            busy_ratio: None,
            busy_bounds: None,
            busy_seconds: 0.0,
            activity: Activity::Unknown,
            idle_seconds: 0.0,
            unknown_seconds: 0.0,
            unallocated_use: false,
            limits: Limits::default(),
            energy: ContainerEnergy::default(),
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct MigView {
    #[serde(skip)]
    pub sample: MigSample,
    pub uuid: String,
    pub profile: String,
    pub sharing_mode: SharingMode,
    pub evidence: SharingEvidence,
    pub why: Vec<&'static str>,
    pub sharers: u32,
    pub replicas: u32,
    pub compute: DeviceSplit,
    /// Measured activity no container was given (withheld shares, processes outside pods).
    pub unattributed: Option<f64>,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct GpuView {
    #[serde(skip)]
    pub sample: GpuSample,
    pub index: u32,
    pub uuid: String,
    pub up: bool,
    /// Whether GPM answered this sample, and why not (shown on /debug/attribution).
    pub gpm: Option<GpmStatus>,
    pub sharing_mode: SharingMode,
    pub evidence: SharingEvidence,
    pub why: Vec<&'static str>,
    pub sharers: u32,
    pub replicas: u32,
    pub mig: Vec<MigView>,
    pub compute: DeviceSplit,
    pub unattributed: Option<f64>,
    /// Containers (a process without a known pod counts as one) with a process that may run
    /// kernels on the GPU this sample.
    pub active_containers: u32,
    pub containers: Vec<ContainerUse>,
    pub processes: Vec<ProcessView>,
    /// Per pod and device (the GPU or each MIG instance): the figure a bill can use and the
    /// rule behind it ([`self::billing`]).
    pub pods: Vec<PodUse>,
    /// Per device: busy, attributed and disputed, accumulated.
    pub accounts: Vec<DeviceAccount>,
    /// The GPU's energy: its floor, what is pending until its counter moves, and what went
    /// to nobody ([`super::energy`]).
    pub energy: GpuEnergy,
}

/// What the exporter shows for one sample. Immutable once built; swapped whole.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Snapshot {
    pub node: String,
    pub timestamp_seconds: f64,
    pub driver_version: String,
    pub gpus: Vec<GpuView>,
    pub collectors: Vec<CollectorStatus>,
    pub nvml_errors: BTreeMap<&'static str, u64>,
    /// Restarts of NVML worker processes: (worker, reason, count).
    pub nvml_worker_restarts: Vec<(String, &'static str, u64)>,
    /// What each NVML call has cost since start.
    pub nvml_call_costs: BTreeMap<&'static str, CallCost>,
    pub sample_duration_seconds: f64,
    /// Sample cycles published since start, this one included.
    pub samples_total: u64,
    /// CUDA probe reports received and not used since start, by reason; empty without the
    /// probe's socket.
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub probe_reports_refused: BTreeMap<&'static str, u64>,
    pub attribution: AttributionStats,
}

/// What a container may use of one device, and who says so.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize)]
pub struct Limits {
    pub memory_bytes: Option<u64>,
    pub compute_ratio: Option<f64>,
    /// `hami`, `volcano-vgpu`, `kai`, `mps-env` (the container's own variables),
    /// `dra-mps` (the DRA claim's `GpuConfig`/`MigDeviceConfig` MPS defaults) or
    /// `mps-device-plugin` (replicas split the device evenly).
    pub source: Option<&'static str>,
}

/// One pod's use of one device (a GPU or a MIG instance).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PodUse {
    pub namespace: String,
    pub pod: String,
    pub workload_kind: String,
    pub workload: String,
    pub mig_uuid: Option<String>,
    pub sharing_mode: SharingMode,
    /// Share of device time, summed over its containers, or the device's reading when the pod
    /// is the only one running kernels there; `None` when no rule can tell.
    pub share: Option<f64>,
    /// The rule that gave `share`.
    pub method: SplitMethod,
    /// Device-seconds attributed to the pod, by the rule that attributed them.
    pub attributed_seconds: BTreeMap<SplitMethod, f64>,
    /// Device-seconds the device measured busy while the pod ran kernels there and no rule
    /// could attribute them (they may be the pod's, or a co-tenant's).
    pub unattributed_seconds: f64,
}

/// One device's accounts: what it measured busy, what was attributed and how, and how often
/// its split was disputed.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct DeviceAccount {
    pub mig_uuid: Option<String>,
    /// Device-seconds busy: the device's activity integrated over samples.
    pub busy_seconds: f64,
    pub attributed_seconds: BTreeMap<SplitMethod, f64>,
    /// Samples whose split was disputed, by reason.
    pub disputed_samples: BTreeMap<DisputeReason, u64>,
}

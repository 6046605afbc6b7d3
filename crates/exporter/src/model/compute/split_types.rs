//! What the split of a device's compute reads and decides ([`crate::model::compute`]): shared by
//! its rules and by the probe's part of them ([`super::probe_split`]), so neither imports
//! the other's types.

use std::collections::{BTreeMap, HashMap};

use serde::Serialize;

use super::timeslice::{Held, ProbeStages};
use crate::model::ProcessSample;

/// Below this share of device time a process or container counts as idle for that sample.
pub const IDLE_SHARE: f64 = 0.01;
/// NVML booking at least this much to a process whose probe claims nothing contradicts it:
/// NVML books a sample only to a context that ran kernels in it.
pub const NVML_BOOKED: f64 = 0.05;
/// CPU use (cores, over the trailing window) below which a process cannot be launching
/// kernels at any rate that matters. A sleeping Python process holding a CUDA context reads
/// 0; the busy tenants measured on the H100 used far more (docs/validation.md).
pub const QUIET_CPU_CORES: f64 = 0.005;

/// What the CUDA probe reported for one process, over the trailing window.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize)]
pub struct ProbeReading {
    /// Kernel busy time (union of kernel spans) per second of wall time, 0..=1, before any
    /// time-slicing normalisation. `None` until two reports span the window. From a probe
    /// tracing in duty cycles, over its traced time only.
    pub busy_ratio: Option<f64>,
    /// Share of the window the probe traced, when it traces in duty cycles (a launch-bound
    /// process); `None` when it traces always.
    pub traced_share: Option<f64>,
    /// Cumulative kernel busy seconds since the probe started in the process.
    pub busy_seconds: f64,
    /// Cumulative kernels completed.
    pub kernels: u64,
    /// The probe has not reported for longer than its once-a-second rhythm allows: it stopped
    /// (by fault or by choice) while its process still runs. See [`super::evidence`].
    pub silent: bool,
    /// The probe's clock (the probes' shared clock, in seconds) carried forward to tessera's
    /// now: every probe on a node should read the same, within a report's delivery time.
    pub clock_seconds: Option<f64>,
    /// Kernels completed over the window (between the same two reports as `busy_ratio`);
    /// `None` when there is no busy ratio.
    pub window_kernels: Option<u64>,
    /// The probe sends totals only (wire version 1): no clock and no timeline to set its
    /// kernels beside the others' ([`super::evidence`]).
    pub totals_only: bool,
    /// Another CUPTI client in the process (a profiler: the PyTorch profiler, Nsight Systems)
    /// holds CUPTI, so the probe's kernel records go to it: the probe measures nothing, and
    /// says so rather than read low. No busy ratio while it lasts.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub profiler: bool,
    /// The probe is loaded but found no CUPTI to load: it measures nothing and says so.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub no_cupti: bool,
}

pub use super::timeslice::ProbeTimeline;

/// Per-process facts beyond NVML, gathered over the same trailing window.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ActivityInputs {
    /// CPU cores used by each process over the window; absent when not known yet (a process
    /// first seen this cycle, or procfs unreadable).
    pub cpu_cores: HashMap<u32, f64>,
    pub probe: HashMap<u32, ProbeReading>,
    pub probe_timelines: HashMap<u32, ProbeTimeline>,
    /// The trailing window, in seconds. A device counts idle only after reading idle over
    /// most of it (`compute::device_idle_over_window`); 0 lets one reading decide.
    pub window_seconds: f64,
    /// How far behind the sample the probes' timelines end (they wait for late kernel
    /// records); 0 without them.
    pub timeline_lag_seconds: f64,
}

/// How a device's compute was split among its processes this sample.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum SplitMethod {
    /// The device was idle, or nothing ran on it.
    Idle,
    /// One process may run kernels: NVML's figures are its own.
    SoleActiveProcess,
    /// Every candidate carries the CUDA probe.
    Probe,
    /// A MIG instance with one active holder: the instance's GPM activity is its.
    MigInstance,
    /// Several processes may run kernels and no source can split them: shares withheld.
    Withheld,
    /// Several processes may run kernels, all of one container: the device's reading is that
    /// container's, its processes' shares stay withheld ([`super::evidence`]).
    SoleActiveContainer,
    /// Several containers of one pod may run kernels: the device's reading is the pod's.
    SoleActivePod,
    /// Every candidate but one container's carries the probe: that container gets the
    /// device's busy time less the probed tenants' own time.
    ByDifference,
    /// The probes' claims contradict evidence the tenants do not control: withheld.
    Disputed,
}

impl SplitMethod {
    pub fn as_label(self) -> &'static str {
        match self {
            SplitMethod::Idle => "idle",
            SplitMethod::SoleActiveProcess => "sole-active-process",
            SplitMethod::Probe => "probe",
            SplitMethod::MigInstance => "mig-instance",
            SplitMethod::Withheld => "withheld",
            SplitMethod::SoleActiveContainer => "sole-active-container",
            SplitMethod::SoleActivePod => "sole-active-pod",
            SplitMethod::ByDifference => "by-difference",
            SplitMethod::Disputed => "disputed",
        }
    }
}

/// Whether a container used the device this sample, as far as evidence goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Activity {
    Idle,
    Busy,
    Unknown,
}

/// One process's published share and the verdict behind it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize)]
pub struct ProcessShare {
    /// Share of device time, 0..=1; `None` when withheld.
    pub share: Option<f64>,
    /// The probe's busy share after normalisation, when the probe reports for it.
    pub busy_ratio: Option<f64>,
    pub quiet: bool,
    /// What the probes' evidence bounds its share by from below: the time its kernels' solo
    /// durations explain ([`super::probe_split`], "Bounds"). `None` where no floor is known.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub lower: Option<f64>,
    /// ... and from above: the union of its kernel spans, which under time-slicing holds
    /// others' slices and under MPS its kernels' slowdown beside others'.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub upper: Option<f64>,
}

/// The split of one device, with the evidence `/debug/attribution` shows.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct DeviceSplit {
    pub method: SplitMethod,
    /// Device activity the split is measured against (NVML utilization on a GPU, GPM SM
    /// activity on a MIG instance).
    pub device_activity: Option<f64>,
    /// Processes that may have run kernels this sample.
    pub candidates: Vec<u32>,
    /// Processes known not to have: NVML booked nothing, no probe kernels, CPU near zero.
    pub quiet: Vec<u32>,
    /// Of `quiet`, those idle only on their own probe's word (it saw no kernel while its
    /// co-tenants' kernels explained the device's busy time): a dispute withholds them too.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub probe_idle: Vec<u32>,
    /// Scale applied to the probe's figures: to the device's busy time under time-slicing
    /// (a cap only, when timelines split it), to the whole instance on MIG; 1 when none.
    pub probe_scale: Option<f64>,
    /// One line for people: why shares are what they are.
    pub why: String,
    /// The probes' shares came from their millisecond timelines (not scaled spans).
    pub from_timelines: bool,
    /// A figure decided above the processes: a container's or a pod's ([`super::evidence`]).
    pub wide: Option<super::figures::WideFigure>,
    /// Why the probes' claims were not believed, when the split is disputed (or was, before
    /// a wider rule settled it).
    pub disputed: Vec<super::figures::DisputeReason>,
    /// Candidates whose probe lost its kernel records to a profiler in the process
    /// ([`ProbeReading::profiler`]): the device's shares are withheld while there are any
    /// beside another candidate, since each co-tenant's is split against their timelines.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub profiler: Vec<u32>,
    /// Candidates whose probe found no CUPTI ([`ProbeReading::no_cupti`]): withheld as for
    /// `profiler`, with that reason.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub no_cupti: Vec<u32>,
    /// With timelines (time-slicing or MPS): what each step of the split gave each process.
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub probe_stages: BTreeMap<u32, ProbeStages>,
    /// Under time-slicing: processes whose kernels outlast time slices beside other tenants'.
    /// What their spans held, the share the probe's figures gave them, and whether it was
    /// withheld (only where no timelines split the device).
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub outlasting: BTreeMap<u32, Outlasting>,
    /// Under time-slicing with timelines: how far the tenants' solo parts ran past the
    /// milliseconds they shared, as a share of them ([`super::timeslice::solo_excess`]).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub solo_excess: Option<f64>,
    /// In milliseconds only one probe covered, the share of its span time its kernels' solo
    /// durations did not explain, when that is past what an honest tenant's estimates miss
    /// but short of a hidden tenant's mark: point figures withheld, bounds kept
    /// ([`super::evidence`]).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub bounds_only: Option<f64>,
    /// What the stretch checks read, whether or not either fired: `[stretch, hidden]` over the
    /// milliseconds one probe covered alone, measured once per probes' split
    /// ([`super::evidence`]); shown so the tolerances can be tuned against real tenants
    /// (lab/device/corpus).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub lone_stretch: Option<[f64; 2]>,
    /// When the device's current run of readings below [`IDLE_SHARE`] began; `None` while it
    /// reads busy (or reads nothing). Carried to the next sample.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub idle_since: Option<f64>,
    /// The device reads idle now but has not over the window: a share taken from that reading
    /// does not make its container idle.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub idle_unsettled: bool,
    /// The mean of the device's readings over the probes' window, this one included: what the
    /// claims' checks weigh. A reading covers only the time since the previous sample (a
    /// second), the probes' claims the whole window; bursty tenants made the second's figure
    /// swing from 0.02 to 0.35 within one draw and dispute honest claims.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub device_window: Option<f64>,
    /// The stretch of time the probes' figures and bounds cover, `[start, end]` in the sample's
    /// clock (unix seconds): the trailing window, or with timelines the window ending
    /// `timeline_lag_seconds` before the sample. Who checks a figure against their own
    /// records checks it over this stretch: a second off, a bursty tenant's figure read 20 %
    /// from its truth on the H200 corpus.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub figure_window: Option<[f64; 2]>,
    /// The readings `device_window` averages, `(time, reading)`, over the window and the
    /// timelines' lag before it: carried to the next sample.
    #[serde(skip)]
    pub recent_activity: Vec<(f64, f64)>,
    #[serde(skip)]
    pub shares: HashMap<u32, ProcessShare>,
}

/// A share withheld because the process's kernels outlast time slices.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize)]
pub struct Outlasting {
    #[serde(flatten)]
    pub held: Held,
    /// The share the probe's figures gave it (after the device's cap), which the claims'
    /// checks weigh, published or not.
    pub claim: f64,
    /// Withheld: no timelines split the device, and its spans hold others' slices.
    pub withheld: bool,
}

impl DeviceSplit {
    pub fn share_of(&self, pid: u32) -> ProcessShare {
        self.shares.get(&pid).copied().unwrap_or_default()
    }
}

/// Everything about one device the split needs.
pub struct DeviceCompute<'a> {
    pub processes: &'a [&'a ProcessSample],
    /// NVML utilization on a GPU; GPM SM activity on a MIG instance.
    pub device_activity: Option<f64>,
    /// MPS (or MIG+MPS): kernels of several clients run concurrently, so probe spans are
    /// already exclusive and must not be scaled.
    pub mps: bool,
    pub mig_instance: bool,
    pub activity: &'a ActivityInputs,
    /// This sample's time, seconds.
    pub now: f64,
    /// When the device's run of idle readings began, as the previous sample left it.
    pub idle_since: Option<f64>,
    /// The device's earlier readings, `(time, reading)`, as the previous sample left them.
    pub recent_activity: &'a [(f64, f64)],
}

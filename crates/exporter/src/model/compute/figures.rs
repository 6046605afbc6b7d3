//! What a device's split can carry above its processes, as plain data: a figure decided for a
//! whole container or pod, and why a split was disputed. `compute` carries them, `evidence`
//! decides them, billing and the encoders count them.

use serde::Serialize;

use crate::model::holding::PodRef;

/// Why a device's split was disputed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum DisputeReason {
    /// The claims add up to less than the device measured busy, beyond the tolerance.
    UnderClaimed,
    /// The claims add up to more than the device measured busy (where they cannot overlap).
    OverClaimed,
    /// NVML booked kernel time to a process whose probe claims none.
    NvmlBooked,
    /// A probe claims much of the device for a process that spent no CPU time.
    ClaimWithoutCpu,
    /// A probed candidate claims nothing while a co-tenant would be charged the difference.
    ClaimsNothing,
    /// A probe stopped reporting while its process runs.
    ProbeSilent,
    /// Probes disagree about the shared clock, so their timelines cannot be set side by side.
    Clock,
    /// Kernels covering a millisecond alone ran far slower than their solo durations: a
    /// co-tenant ran in it without claiming it.
    StretchedAlone,
    /// A probe sends totals only beside probes that send timelines: its claim cannot be set
    /// against theirs, and sending less is how a claim would escape the checks.
    TotalsOnly,
    /// Under time-slicing the tenants' solo parts ran past the milliseconds they shared, beyond
    /// what honest timelines show: a timeline claims time its kernels cannot have run.
    SoloExcess,
}

impl DisputeReason {
    pub fn as_label(self) -> &'static str {
        match self {
            DisputeReason::UnderClaimed => "under-claimed",
            DisputeReason::OverClaimed => "over-claimed",
            DisputeReason::NvmlBooked => "nvml-booked",
            DisputeReason::ClaimWithoutCpu => "claim-without-cpu",
            DisputeReason::ClaimsNothing => "claims-nothing",
            DisputeReason::ProbeSilent => "probe-silent",
            DisputeReason::Clock => "clock",
            DisputeReason::StretchedAlone => "stretched-alone",
            DisputeReason::TotalsOnly => "totals-only",
            DisputeReason::SoloExcess => "solo-excess",
        }
    }
}

/// A figure decided for a whole container or pod rather than summed from its processes.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct WideFigure {
    pub namespace: String,
    pub pod: String,
    /// `None` for a pod-level figure (several of the pod's containers ran kernels).
    pub container: Option<String>,
    /// Share of device time (on MIG, of the instance's SM activity).
    pub share: f64,
}

impl WideFigure {
    /// Whether this is the container's own figure.
    pub fn is_container(&self, p: &PodRef) -> bool {
        self.container.as_deref() == Some(p.container.as_str()) && self.is_pod(p)
    }
    pub fn is_pod(&self, p: &PodRef) -> bool {
        self.namespace == p.namespace && self.pod == p.pod
    }
}

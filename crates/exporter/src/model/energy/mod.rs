//! A GPU's energy, split among the containers that hold and use it (docs/energy.md).
//!
//! What is measured: the GPU's energy counter (read on NVML's slow cadence), its power each
//! sample, its clocks, and the compute split ([`super::compute`]). What is modelled: that a
//! GPU's power is an idle floor (what it draws with nothing running) plus a dynamic part that
//! follows the work run on it.
//!
//! * **The floor** is learned from the GPU itself ([`floor`]): the median of its power over a
//!   window in which it read idle throughout, the lowest such median kept per clock state.
//!   Until a GPU has one, the floor of the state its siblings of the same model idle in is
//!   used; until any has, no floor is known.
//! * **Static**: the floor, split among the device's holders (equally, or by the grant a
//!   fractional scheduler or an MPS limit gives each); on MIG, by slice count first, the
//!   floor of slices nobody holds (or that are not partitioned) going to nobody.
//! * **Dynamic**: the power above the floor, split by each container's published compute
//!   share; on MIG, among instances by their GPM SM activity × slices first. A withheld share
//!   withholds its energy, with the split's reason; where the probes bound a withheld share,
//!   the energy is bounded too.
//! * A device that reads idle (the split says so, or nothing measured runs) draws only its
//!   floor, whatever it is: its whole power is static, and no floor is needed to split it.
//!   Nor is one needed where the static and the dynamic split go to the same containers in
//!   the same proportions (one tenant holding and using a GPU alone). Elsewhere, without a
//!   floor, the energy goes to nobody as `floor-unknown`.
//!
//! Each sample's split is an estimate of who drew the power over the time since the previous
//! sample (power × seconds), kept pending ([`ledger`]). When the GPU's counter moves, the
//! pending estimates are scaled to what it measured and credited, so the containers' energy
//! plus what went to nobody is the counter's increase, to rounding, at every scrape: the
//! counter is the measurement, the power readings only decide who drew it.

pub mod floor;
pub mod ledger;
pub mod split;

use std::collections::BTreeMap;
use std::sync::Arc;

use serde::Serialize;

use super::compute::Activity;
use super::holding::PodRef;

pub use self::floor::{ClockKey, FloorSource, FloorState};

/// Why energy went to no container (`gpu_energy_unattributed_joules_total`'s `reason`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Remainder {
    /// Nobody holds the device, the MIG instance or the slices (not partitioned, or not
    /// allocated).
    Unallocated,
    /// The split needs the idle floor and none is known yet.
    FloorUnknown,
    /// Dynamic energy of a device whose compute split withheld a share: several tenants ran
    /// kernels and nothing could split them.
    Withheld,
    /// The probes' claims were disputed: withheld, nobody charged.
    Disputed,
    /// Only a pod's figure is known (several of its containers ran kernels), no container's.
    SoleActivePod,
    /// The probes' point figures were withheld and only bounds published: see
    /// `gpu_container_energy_lower_joules_total` / `_upper_`.
    BoundsOnly,
    /// Activity the device measured that the split gave no container: processes outside any
    /// known pod or container, or what the device measured past the tenants' shares.
    Unattributed,
    /// Time no sample covered with a power reading: the GPU was down, a power reading was
    /// missing, or the sampler stalled.
    Unsampled,
    /// A container that left before the GPU's counter was next read.
    Departed,
}

impl Remainder {
    pub fn as_label(self) -> &'static str {
        match self {
            Remainder::Unallocated => "unallocated",
            Remainder::FloorUnknown => "floor-unknown",
            Remainder::Withheld => "withheld",
            Remainder::Disputed => "disputed",
            Remainder::SoleActivePod => "sole-active-pod",
            Remainder::BoundsOnly => "bounds-only",
            Remainder::Unattributed => "unattributed",
            Remainder::Unsampled => "unsampled",
            Remainder::Departed => "departed",
        }
    }
}

/// Whether the compute split knew a container idle when energy was charged to it
/// (`activity` label): idle energy is what an allocation burned doing nothing. Busy and
/// undecided are one value: what a bill and the waste rules need apart is idle, and at fleet
/// scale a container's series are paid for on every node (its undecided time is counted
/// apart in `gpu_container_activity_unknown_seconds_total`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum State {
    Idle,
    NotIdle,
}

impl State {
    pub fn as_label(self) -> &'static str {
        match self {
            State::Idle => "idle",
            State::NotIdle => "not-idle",
        }
    }
}

impl From<Activity> for State {
    fn from(a: Activity) -> Self {
        match a {
            Activity::Idle => State::Idle,
            Activity::Busy | Activity::Unknown => State::NotIdle,
        }
    }
}

/// A container on one device of a GPU: the key its energy is kept under, as its series are
/// (a container whose pod labels change starts new series, and a new account). Shared
/// pointers: every sample's split and pending account clone keys for each container.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct EnergyKey {
    pub pod: Arc<PodRef>,
    pub mig_uuid: Option<Arc<str>>,
}

impl EnergyKey {
    pub fn new(pod: Arc<PodRef>, mig_uuid: Option<&str>) -> Self {
        EnergyKey {
            pod,
            mig_uuid: mig_uuid.map(Arc::from),
        }
    }
}

/// Who a share of a GPU's energy goes to: a container (in the state it was charged in), or
/// nobody, for a reason.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Recipient {
    Container(EnergyKey, State),
    Nobody(Remainder),
}

/// Energy by who it goes to, with the parts that sit beside the sum: each container's
/// dynamic part (of its total) and the bounds on withheld dynamic energy (of `Nobody`'s).
/// Joules, or power × seconds estimates of them while pending.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Charges {
    /// Adds up to the energy split: every joule goes to exactly one recipient.
    pub split: BTreeMap<Recipient, f64>,
    pub dynamic: BTreeMap<EnergyKey, f64>,
    pub lower: BTreeMap<EnergyKey, f64>,
    pub upper: BTreeMap<EnergyKey, f64>,
}

impl Charges {
    /// The energy `split` accounts for.
    pub fn total(&self) -> f64 {
        self.split.values().sum()
    }

    /// Adds `other`, each entry times `scale`.
    pub fn add(&mut self, other: &Charges, scale: f64) {
        for (r, v) in &other.split {
            *self.split.entry(r.clone()).or_default() += v * scale;
        }
        for (to, from) in [
            (&mut self.dynamic, &other.dynamic),
            (&mut self.lower, &other.lower),
            (&mut self.upper, &other.upper),
        ] {
            for (k, v) in from {
                *to.entry(k.clone()).or_default() += v * scale;
            }
        }
    }

    pub fn is_empty(&self) -> bool {
        self.split.is_empty()
    }
}

/// Joules by [`State`]; a state never charged is absent (its series with it).
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize)]
pub struct ByState {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub idle: Option<f64>,
    #[serde(rename = "not-idle", skip_serializing_if = "Option::is_none")]
    pub not_idle: Option<f64>,
}

impl ByState {
    pub fn get(&self, s: State) -> Option<f64> {
        match s {
            State::Idle => self.idle,
            State::NotIdle => self.not_idle,
        }
    }

    pub fn add(&mut self, s: State, joules: f64) {
        let slot = match s {
            State::Idle => &mut self.idle,
            State::NotIdle => &mut self.not_idle,
        };
        *slot.get_or_insert(0.0) += joules;
    }

    /// The states charged, with their joules.
    pub fn iter(&self) -> impl Iterator<Item = (State, f64)> {
        [(State::Idle, self.idle), (State::NotIdle, self.not_idle)]
            .into_iter()
            .filter_map(|(s, v)| Some((s, v?)))
    }

    pub fn is_empty(&self) -> bool {
        self.idle.is_none() && self.not_idle.is_none()
    }
}

/// One container's energy on one device since tessera first charged it (joules).
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize)]
pub struct ContainerEnergy {
    /// By whether it was known idle when charged.
    pub joules: ByState,
    /// Of `joules`, the part above the idle floor: its share of the work's power.
    pub dynamic_joules: f64,
    /// Of the dynamic energy withheld (`bounds-only`), what the probes' bounds make its.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub lower_joules: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub upper_joules: Option<f64>,
}

impl ContainerEnergy {
    pub fn total(&self) -> f64 {
        self.joules.iter().map(|(_, v)| v).sum()
    }
}

/// The GPU's counter when it was last seen to move, and the sample time it was read at.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct CounterMark {
    pub joules: f64,
    pub at: f64,
}

/// One GPU's energy accounts, carried from sample to sample in the snapshot.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct GpuEnergy {
    /// The device counter the next increase is measured from; `None` until it is read.
    pub mark: Option<CounterMark>,
    /// Since the mark: each recipient's estimated share (power × seconds), to be scaled to
    /// the counter's increase when it moves. Keyed by containers, which JSON cannot key by:
    /// /debug/attribution shows its total.
    #[serde(skip)]
    pub pending: Charges,
    /// `pending`'s total, for /debug/attribution.
    pub pending_joules: f64,
    /// Of the time since the mark, the seconds samples covered with a power reading.
    pub covered_seconds: f64,
    /// Energy given to nobody since tessera started, by reason (joules).
    pub remainder: BTreeMap<Remainder, f64>,
    pub floor: FloorState,
    /// The floor this sample's split used, and where it came from.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub floor_watts: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub floor_source: Option<FloorSource>,
    /// One line for people: how this sample's energy was split.
    pub why: String,
}

#[cfg(test)]
mod tests;

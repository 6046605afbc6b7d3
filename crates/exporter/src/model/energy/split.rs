//! One sample's split of a GPU's power among recipients, as power × seconds: the static part
//! (the idle floor) by holding, the dynamic part (above the floor) by measured compute share.

use std::collections::BTreeMap;

use super::{Charges, EnergyKey, Recipient, Remainder, State};
use crate::model::compute::IDLE_SHARE;

/// A container on one device, as the energy split reads it.
#[derive(Debug, Clone, PartialEq)]
pub struct Tenant {
    pub key: EnergyKey,
    pub state: State,
    /// Its weight among the device's holders (its grant, or its allocations); 0 when it does
    /// not hold the device.
    pub hold: f64,
    /// Its published share of the device's time running kernels; `None` when withheld.
    pub share: Option<f64>,
    /// What the probes bound a withheld share by, (lower, upper).
    pub bounds: Option<(f64, f64)>,
}

/// One device: a GPU without MIG, or one MIG instance.
#[derive(Debug, Clone, PartialEq)]
pub struct DeviceUse {
    /// Its part of the GPU's idle floor: 1 for a GPU, its slices over the GPU's for an
    /// instance.
    pub floor_share: f64,
    /// NVML utilization on a GPU, GPM SM activity on an instance.
    pub activity: Option<f64>,
    /// The compute split found the device idle (or nothing on it running kernels).
    pub idle: bool,
    pub tenants: Vec<Tenant>,
    /// Where the dynamic energy no tenant was given goes when a share is withheld (the split's
    /// reason); what is left past known shares otherwise goes to `unattributed`.
    pub withheld: Option<Remainder>,
}

/// One GPU's sample.
#[derive(Debug, Clone, PartialEq)]
pub struct GpuUse {
    pub power_watts: f64,
    pub floor_watts: Option<f64>,
    pub seconds: f64,
    /// Whether `devices` are MIG instances (each weighted by `floor_share` in the dynamic
    /// split too).
    pub mig: bool,
    pub devices: Vec<DeviceUse>,
}

/// A share of energy by recipient; fractions that add up to 1.
type Dist = BTreeMap<Recipient, f64>;

fn nobody(r: Remainder) -> Dist {
    BTreeMap::from([(Recipient::Nobody(r), 1.0)])
}

fn add(into: &mut Dist, from: &Dist, scale: f64) {
    if scale <= 0.0 {
        return;
    }
    for (r, v) in from {
        *into.entry(r.clone()).or_default() += v * scale;
    }
}

/// The floor by holding: each holder's weight of the device, nobody's if nobody holds it.
fn static_of(d: &DeviceUse) -> Dist {
    let total: f64 = d.tenants.iter().map(|t| t.hold.max(0.0)).sum();
    if total <= 0.0 {
        return nobody(Remainder::Unallocated);
    }
    d.tenants
        .iter()
        .filter(|t| t.hold > 0.0)
        .map(|t| (Recipient::Container(t.key.clone(), t.state), t.hold / total))
        .collect()
}

/// The power above the floor by compute share, and the bounds on withheld shares (fractions
/// of the device's dynamic power); `None` when the device ran nothing measurable.
type DynamicSplit = (Dist, BTreeMap<EnergyKey, (f64, f64)>);

fn dynamic_of(d: &DeviceUse) -> Option<DynamicSplit> {
    if d.idle {
        return None;
    }
    let known: f64 = d
        .tenants
        .iter()
        .filter_map(|t| t.share)
        .map(|s| s.max(0.0))
        .sum();
    let measured = d.activity.unwrap_or(0.0).clamp(0.0, 1.0).max(known);
    if measured < IDLE_SHARE {
        return None;
    }
    let mut out = Dist::new();
    for t in &d.tenants {
        if let Some(s) = t.share.filter(|s| *s > 0.0) {
            *out.entry(Recipient::Container(t.key.clone(), t.state))
                .or_default() += s / measured;
        }
    }
    let gap = (1.0 - known / measured).max(0.0);
    let mut bounds = BTreeMap::new();
    if gap > 0.0 {
        let reason = d.withheld.unwrap_or(Remainder::Unattributed);
        out.insert(Recipient::Nobody(reason), gap);
        for t in d.tenants.iter().filter(|t| t.share.is_none()) {
            if let Some((lo, hi)) = t.bounds {
                let f = |v: f64| (v.max(0.0) / measured).min(gap);
                bounds.insert(t.key.clone(), (f(lo), f(hi)));
            }
        }
    }
    Some((out, bounds))
}

fn same(a: &Dist, b: &Dist) -> bool {
    const CLOSE: f64 = 1e-9;
    a.keys().chain(b.keys()).all(|k| {
        let v = |d: &Dist| d.get(k).copied().unwrap_or(0.0);
        (v(a) - v(b)).abs() < CLOSE
    })
}

/// A MIG GPU's power above its floor: among its instances by GPM SM activity × slices, then
/// within each by its own split; `None` when every instance ran nothing.
fn mig_dynamic(devices: &[DeviceUse]) -> Option<DynamicSplit> {
    // An instance without GPM could be running anything: its part is unknown.
    if devices.iter().any(|d| d.activity.is_none() && !d.idle) {
        return Some((nobody(Remainder::Withheld), BTreeMap::new()));
    }
    let parts: Vec<(f64, DynamicSplit)> = devices
        .iter()
        .filter_map(|d| {
            let weight = d.activity.unwrap_or(0.0).clamp(0.0, 1.0) * d.floor_share;
            Some((weight, dynamic_of(d)?))
        })
        .collect();
    let total: f64 = parts.iter().map(|(w, _)| w).sum();
    if total <= 0.0 {
        return None;
    }
    let mut dist = Dist::new();
    let mut bounds: BTreeMap<EnergyKey, (f64, f64)> = BTreeMap::new();
    for (w, (d, b)) in parts {
        add(&mut dist, &d, w / total);
        for (k, (lo, hi)) in b {
            let e = bounds.entry(k).or_default();
            e.0 += lo * w / total;
            e.1 += hi * w / total;
        }
    }
    Some((dist, bounds))
}

/// The sample's charges (joule estimates: power × seconds) and one line saying how.
pub fn split(g: &GpuUse) -> (Charges, String) {
    let energy = g.power_watts.max(0.0) * g.seconds.max(0.0);
    let mut out = Charges::default();
    if energy <= 0.0 {
        return (out, "no energy to split".into());
    }
    // The floor by holding, and the slices of a MIG GPU nobody partitioned.
    let mut statics = Dist::new();
    for d in &g.devices {
        add(&mut statics, &static_of(d), d.floor_share);
    }
    let placed: f64 = g.devices.iter().map(|d| d.floor_share).sum();
    if g.devices.is_empty() || placed < 1.0 - 1e-9 {
        add(
            &mut statics,
            &nobody(Remainder::Unallocated),
            1.0 - placed.min(1.0),
        );
    }
    // The power above it by activity: among instances by SM activity × slices first.
    let dynamics = if g.mig {
        mig_dynamic(&g.devices)
    } else {
        g.devices.first().and_then(dynamic_of)
    };
    let why = match (dynamics, g.floor_watts) {
        (None, _) => {
            // Nothing ran: the whole power is the floor, whatever its value.
            add(&mut out.split, &statics, energy);
            "the GPU read idle: its whole power is its floor, split by holding".to_owned()
        }
        (Some((dynamic, bounds)), Some(floor)) => {
            let floor = floor.clamp(0.0, g.power_watts.max(0.0));
            let (fixed, above) = (floor * g.seconds, (g.power_watts - floor) * g.seconds);
            add(&mut out.split, &statics, fixed);
            add(&mut out.split, &dynamic, above);
            for (r, v) in &dynamic {
                if let Recipient::Container(k, _) = r {
                    *out.dynamic.entry(k.clone()).or_default() += v * above;
                }
            }
            for (k, (lo, hi)) in bounds {
                *out.lower.entry(k.clone()).or_default() += lo * above;
                *out.upper.entry(k).or_default() += hi * above;
            }
            format!(
                "{floor:.1} W floor split by holding, {:.1} W above it by compute share",
                g.power_watts - floor
            )
        }
        (Some((dynamic, _)), None) if same(&statics, &dynamic) => {
            // The same containers in the same proportions either way: the floor's value
            // cannot change anyone's part.
            add(&mut out.split, &statics, energy);
            "no floor known, but holding and use split alike".to_owned()
        }
        (Some(_), None) => {
            add(&mut out.split, &nobody(Remainder::FloorUnknown), energy);
            "no idle floor known for this GPU's model yet: nobody charged".to_owned()
        }
    };
    (out, why)
}

#[cfg(test)]
#[path = "split_tests.rs"]
mod tests;

//! The energy split's step in the join, once every GPU's compute split, container rows and
//! limits are built: each GPU's floor, this sample's charges, and the credits when its
//! counter moved ([`crate::model::energy`]).

use std::collections::{BTreeSet, HashMap};

use crate::model::compute::{DeviceSplit, SplitMethod};
use crate::model::energy::floor::{self, idle_reading, FloorState};
use crate::model::energy::ledger;
use crate::model::energy::split::{self, DeviceUse, GpuUse, Tenant};
use crate::model::energy::{ContainerEnergy, EnergyKey, GpuEnergy, Recipient, Remainder};
use crate::model::holding::PodRef;
use crate::model::view::{ContainerUse, GpuView, Snapshot};

/// The container's key, or `None` for a row no container can be charged under (a process's
/// pod or container not known).
fn key_of(c: &ContainerUse) -> Option<EnergyKey> {
    let p = &c.pod;
    if p.namespace.is_empty() || p.pod.is_empty() || p.container.is_empty() {
        return None;
    }
    Some(EnergyKey::new(c.pod.clone(), c.mig_uuid.as_deref()))
}

/// One device's rows, each with its key.
type Rows<'a> = [(&'a ContainerUse, Option<&'a EnergyKey>)];

/// Each holder's weight in the device's floor: the grants when every holder has one (compute
/// first, then memory: HAMi, Volcano, KAI, MPS limits), its allocations otherwise (a container
/// given two replicas counts two). 0 for a row that holds nothing.
fn holds(rows: &[&ContainerUse]) -> Vec<f64> {
    fn compute(r: &ContainerUse) -> Option<f64> {
        r.limits.compute_ratio
    }
    fn memory(r: &ContainerUse) -> Option<f64> {
        r.limits.memory_bytes.map(|b| b as f64)
    }
    fn allocations(r: &ContainerUse) -> Option<f64> {
        Some(r.allocations.len() as f64)
    }
    let holders: Vec<&ContainerUse> = rows
        .iter()
        .copied()
        .filter(|r| !r.allocations.is_empty())
        .collect();
    let granted = |f: fn(&ContainerUse) -> Option<f64>| {
        !holders.is_empty()
            && holders
                .iter()
                .all(|r| f(r).is_some_and(|v| v.is_finite() && v > 0.0))
    };
    let grants: [fn(&ContainerUse) -> Option<f64>; 2] = [compute, memory];
    let weight = grants
        .into_iter()
        .find(|f| granted(*f))
        .unwrap_or(allocations);
    rows.iter()
        .map(|r| {
            if r.allocations.is_empty() {
                0.0
            } else {
                weight(r).unwrap_or(0.0)
            }
        })
        .collect()
}

/// Where the dynamic energy of a withheld share goes: the split's own reason.
fn withheld_reason(split: &DeviceSplit, rows: &[&ContainerUse]) -> Option<Remainder> {
    match split.method {
        SplitMethod::Disputed => return Some(Remainder::Disputed),
        SplitMethod::SoleActivePod => return Some(Remainder::SoleActivePod),
        SplitMethod::Withheld => return Some(Remainder::Withheld),
        _ => {}
    }
    if split.bounds_only.is_some() {
        return Some(Remainder::BoundsOnly);
    }
    rows.iter()
        .any(|r| r.sm_utilization.is_none() && r.processes > 0)
        .then_some(Remainder::Withheld)
}

fn device(split: &DeviceSplit, keyed: &Rows<'_>, floor_share: f64) -> DeviceUse {
    let rows: Vec<&ContainerUse> = keyed.iter().map(|(r, _)| *r).collect();
    let weights = holds(&rows);
    let tenants = keyed
        .iter()
        .zip(weights)
        .filter_map(|((r, key), hold)| {
            Some(Tenant {
                key: (*key)?.clone(),
                state: r.activity.into(),
                hold,
                share: r.sm_utilization,
                bounds: r.busy_bounds.filter(|_| r.sm_utilization.is_none()),
            })
        })
        .collect();
    DeviceUse {
        floor_share,
        activity: split.device_activity,
        idle: split.method == SplitMethod::Idle,
        tenants,
        withheld: withheld_reason(split, &rows),
    }
}

/// The GPU's sample as the split reads it; `None` without a power reading to split.
fn gpu_use(
    g: &GpuView,
    keys: &[Option<EnergyKey>],
    floor_watts: Option<f64>,
    seconds: f64,
) -> Option<GpuUse> {
    let s = &g.sample;
    let power_watts = s
        .power_watts
        .filter(|w| s.up && w.is_finite() && *w >= 0.0)?;
    let mig = s.mig_enabled == Some(true);
    let on = |mig: Option<&str>| -> Vec<(&ContainerUse, Option<&EnergyKey>)> {
        g.containers
            .iter()
            .zip(keys)
            .filter(|(c, _)| c.mig_uuid.as_deref() == mig)
            .map(|(c, k)| (c, k.as_ref()))
            .collect()
    };
    let devices = if mig {
        let total = s
            .mig_slices_total
            .filter(|t| *t > 0)
            .unwrap_or_else(|| g.mig.iter().map(|m| m.sample.slices).sum())
            .max(1);
        g.mig
            .iter()
            .map(|m| {
                let share = f64::from(m.sample.slices) / f64::from(total);
                device(&m.compute, &on(Some(&m.uuid)), share.min(1.0))
            })
            .collect()
    } else {
        vec![device(&g.compute, &on(None), 1.0)]
    };
    Some(GpuUse {
        power_watts,
        floor_watts,
        seconds,
        mig,
        devices,
    })
}

/// Adds one step's credits to the rows they are for (`keys` beside `rows`).
fn credit(rows: &mut [ContainerUse], keys: &[Option<EnergyKey>], credits: &ledger::Credits) {
    if credits.is_empty() {
        return;
    }
    let mut by_key: HashMap<&EnergyKey, &mut ContainerEnergy> = rows
        .iter_mut()
        .zip(keys)
        .filter_map(|(r, k)| Some((k.as_ref()?, &mut r.energy)))
        .collect();
    for (r, v) in &credits.split {
        if let Recipient::Container(k, state) = r {
            if let Some(e) = by_key.get_mut(k) {
                e.joules.add(*state, *v);
            }
        }
    }
    for (k, v) in &credits.dynamic {
        if let Some(e) = by_key.get_mut(k) {
            e.dynamic_joules += v;
        }
    }
    for (k, v) in &credits.lower {
        if let Some(e) = by_key.get_mut(k) {
            *e.lower_joules.get_or_insert(0.0) += v;
        }
    }
    for (k, v) in &credits.upper {
        if let Some(e) = by_key.get_mut(k) {
            *e.upper_joules.get_or_insert(0.0) += v;
        }
    }
}

/// What the join needs besides the GPUs: the sample's time, the seconds since the previous
/// sample, and the window a floor is learned over.
pub(super) struct EnergyStep<'a> {
    pub(super) previous: Option<&'a Snapshot>,
    pub(super) now: f64,
    pub(super) dt: f64,
    pub(super) floor_window: f64,
}

/// Splits every GPU's energy for this sample, carrying each account on from `previous`.
pub(super) fn fill_all(gpus: &mut [GpuView], step: &EnergyStep<'_>) {
    let before = |uuid: &str| {
        step.previous
            .and_then(|s| s.gpus.iter().find(|v| v.uuid == uuid))
    };
    let mut accounts: Vec<GpuEnergy> = gpus
        .iter()
        .map(|g| {
            let mut acc = before(&g.uuid)
                .map(|b| b.energy.clone())
                .unwrap_or_default();
            acc.floor
                .observe(step.now, idle_reading(&g.sample), step.floor_window);
            acc
        })
        .collect();
    let floors: Vec<(&str, &FloorState)> = gpus
        .iter()
        .zip(&accounts)
        .map(|(g, a)| (g.sample.model.as_str(), &a.floor))
        .collect();
    let applied = floor::applied(&floors);
    for ((g, mut acc), floor) in gpus.iter_mut().zip(accounts.drain(..)).zip(applied) {
        if let Some(b) = before(&g.uuid) {
            let old: HashMap<(&PodRef, Option<&str>), &ContainerEnergy> = b
                .containers
                .iter()
                .filter(|c| !c.energy.joules.is_empty())
                .map(|c| ((c.pod.as_ref(), c.mig_uuid.as_deref()), &c.energy))
                .collect();
            if !old.is_empty() {
                for r in &mut g.containers {
                    if let Some(e) = old.get(&(r.pod.as_ref(), r.mig_uuid.as_deref())) {
                        r.energy = **e;
                    }
                }
            }
        }
        let keys: Vec<Option<EnergyKey>> = g.containers.iter().map(key_of).collect();
        acc.floor_watts = floor.map(|(w, _)| w);
        acc.floor_source = floor.map(|(_, s)| s);
        let (charges, covered, why) = match gpu_use(g, &keys, acc.floor_watts, step.dt) {
            Some(u) if step.dt > 0.0 => {
                let (c, why) = split::split(&u);
                (c, step.dt, why)
            }
            Some(_) => (Default::default(), 0.0, "first sample".to_owned()),
            None => (Default::default(), 0.0, "no power reading".to_owned()),
        };
        let present: BTreeSet<EnergyKey> = keys.iter().flatten().cloned().collect();
        let counter = g.sample.energy_joules.filter(|_| g.sample.up);
        let credits = ledger::step(&mut acc, &charges, covered, counter, step.now, &present);
        credit(&mut g.containers, &keys, &credits);
        acc.why = why;
        g.energy = acc;
    }
}

#[cfg(test)]
#[path = "energy_step_tests.rs"]
mod tests;

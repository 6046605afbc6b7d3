//! The idle floor: what a GPU draws with nothing running, learned from the GPU itself.
//!
//! While a GPU reads idle (NVML utilization and GPM SM activity below the idle share; on MIG,
//! every instance's GPM SM activity) at one clock state (SM and memory clock), its power
//! readings are collected; each time they span `window` seconds, their median is a candidate
//! and the floor of that clock state is the lowest candidate seen. A median, because one odd
//! reading must not set the floor; a window, because power takes seconds to settle after
//! work stops; the lowest, because a warm GPU's leakage or a reading taken while settling
//! only ever reads higher.
//!
//! The floor a sample uses is that of the clock state the GPU itself last settled idle in. A
//! busy GPU runs at other clocks, so the floor of its current clocks is not what it draws
//! for being held: it is what it returns to. A GPU never seen idle since tessera started
//! takes the state its siblings of the same model settle in, and the median of their floors
//! there: idle power differs by a few watts from one board to the next. With neither, no
//! floor is known and nothing is guessed.

use std::collections::BTreeMap;

use serde::Serialize;

use crate::model::compute::IDLE_SHARE;
use crate::model::GpuSample;

/// A GPU's clocks when it read idle: the state its floor is kept for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
pub struct ClockKey {
    /// 0 when NVML gives no clock.
    pub sm_mhz: u32,
    pub memory_mhz: u32,
}

/// A floor learned at one clock state.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct LearnedFloor {
    pub clocks: ClockKey,
    pub watts: f64,
    /// Sample time of the window that set it.
    pub at: f64,
}

/// Where the floor a sample used came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum FloorSource {
    /// This GPU's own idle readings.
    Own,
    /// The median of the floors its siblings of the same model learned (it was not seen
    /// idle itself).
    SameModel,
}

/// One GPU's floors and the idle run being read.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct FloorState {
    pub learned: Vec<LearnedFloor>,
    /// The clock state the GPU last settled idle in (a floor was learned there).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub idle_clocks: Option<ClockKey>,
    /// The current idle run: its clock state, when its window began, and the power readings
    /// since.
    #[serde(skip)]
    run: Option<(ClockKey, f64, Vec<f64>)>,
}

/// A GPU's power reading taken while it read idle, and its clocks.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct IdleReading {
    pub clocks: ClockKey,
    pub watts: f64,
}

fn below_idle(v: Option<f64>) -> Option<bool> {
    v.map(|a| a < IDLE_SHARE)
}

/// The GPU's power and clocks, when every activity figure it has reads idle. A GPU with no
/// activity figure at all is never taken for idle.
pub fn idle_reading(gpu: &GpuSample) -> Option<IdleReading> {
    if !gpu.up {
        return None;
    }
    let watts = gpu.power_watts.filter(|w| w.is_finite() && *w >= 0.0)?;
    let gpm = below_idle(gpu.gpm.map(|g| g.sm_activity));
    let idle = if gpu.mig_enabled == Some(true) && !gpu.mig_instances.is_empty() {
        // Every instance must say: one without GPM could be running anything.
        gpu.mig_instances
            .iter()
            .all(|m| below_idle(m.gpm.map(|g| g.sm_activity)) == Some(true))
            && gpm != Some(false)
    } else {
        match (below_idle(gpu.utilization), gpm) {
            (None, None) => false,
            (u, g) => u != Some(false) && g != Some(false),
        }
    };
    if !idle {
        return None;
    }
    let mhz =
        |hz: Option<f64>| hz.map_or(0, |h| (h / 1e6).round().clamp(0.0, u32::MAX as f64) as u32);
    Some(IdleReading {
        clocks: ClockKey {
            sm_mhz: mhz(gpu.sm_clock_hertz),
            memory_mhz: mhz(gpu.memory_clock_hertz),
        },
        watts,
    })
}

fn median(values: &mut [f64]) -> Option<f64> {
    if values.is_empty() {
        return None;
    }
    values.sort_by(f64::total_cmp);
    let n = values.len();
    Some(if n % 2 == 1 {
        values[n / 2]
    } else {
        (values[n / 2 - 1] + values[n / 2]) / 2.0
    })
}

impl FloorState {
    /// The floor learned for `clocks`, if any.
    pub fn at(&self, clocks: ClockKey) -> Option<f64> {
        self.learned
            .iter()
            .find(|l| l.clocks == clocks)
            .map(|l| l.watts)
    }

    /// The GPU's own floor: that of the clock state it last settled idle in.
    pub fn own(&self) -> Option<(ClockKey, f64)> {
        let k = self.idle_clocks?;
        Some((k, self.at(k)?))
    }

    /// Takes this sample's reading: `Some` while the GPU reads idle. A run of idle readings at
    /// one clock state yields a candidate each time it spans `window` seconds.
    pub fn observe(&mut self, now: f64, reading: Option<IdleReading>, window: f64) {
        let Some(r) = reading else {
            self.run = None;
            return;
        };
        let same = self
            .run
            .as_ref()
            .is_some_and(|(k, since, _)| *k == r.clocks && *since <= now);
        if !same {
            self.run = Some((r.clocks, now, Vec::new()));
        }
        let Some((clocks, since, readings)) = self.run.as_mut() else {
            return;
        };
        readings.push(r.watts);
        // A window's readings are those after its start: the first one closes the gap before.
        if now - *since < window || readings.len() < 2 {
            return;
        }
        let Some(candidate) = median(&mut readings[1..]) else {
            return;
        };
        let clocks = *clocks;
        *since = now;
        readings.clear();
        readings.push(r.watts);
        match self.learned.iter_mut().find(|l| l.clocks == clocks) {
            Some(l) if l.watts <= candidate => {}
            Some(l) => {
                l.watts = candidate;
                l.at = now;
            }
            None => self.learned.push(LearnedFloor {
                clocks,
                watts: candidate,
                at: now,
            }),
        }
        self.idle_clocks = Some(clocks);
    }
}

/// The floor each GPU's split uses: its own, else the median of what its siblings of the same
/// model learned at the clock state most of them settle idle in. `gpus` are (model, floors).
pub fn applied(gpus: &[(&str, &FloorState)]) -> Vec<Option<(f64, FloorSource)>> {
    // Per model: how many GPUs settle idle in each clock state, and their floors there.
    let mut by_model: BTreeMap<&str, BTreeMap<ClockKey, Vec<f64>>> = BTreeMap::new();
    for (model, f) in gpus {
        if let Some((k, w)) = f.own() {
            by_model
                .entry(model)
                .or_default()
                .entry(k)
                .or_default()
                .push(w);
        }
    }
    let model_floor = |model: &str| -> Option<f64> {
        let states = by_model.get(model)?;
        // The most common idle state; among equals, the lowest floor (the state a GPU falls
        // to when nobody holds its clocks up).
        let (_, floors) = states.iter().max_by(|(_, a), (_, b)| {
            a.len()
                .cmp(&b.len())
                .then_with(|| min_of(b).total_cmp(&min_of(a)))
        })?;
        median(&mut floors.clone())
    };
    gpus.iter()
        .map(|(model, f)| match f.own() {
            Some((_, w)) => Some((w, FloorSource::Own)),
            None => model_floor(model).map(|w| (w, FloorSource::SameModel)),
        })
        .collect()
}

fn min_of(v: &[f64]) -> f64 {
    v.iter().copied().fold(f64::INFINITY, f64::min)
}

#[cfg(test)]
#[path = "floor_tests.rs"]
mod tests;

//! From estimates to joules: each sample's charges wait until the GPU's energy counter moves,
//! then are scaled to its increase and credited. The counter is read on NVML's slow cadence
//! (seconds apart) while power is read every sample, so the estimates say who drew the
//! energy and the counter says how much.

use std::collections::{BTreeMap, BTreeSet};

use super::{Charges, CounterMark, EnergyKey, GpuEnergy, Recipient, Remainder};

/// What one step credits to containers (joules); what goes to nobody is added to the GPU's
/// own remainder.
pub type Credits = Charges;

/// One sample: `charges` (estimates over `covered` seconds, 0 when the sample had no power
/// reading) join the pending ones; if `counter` moved since the mark, the pending charges
/// are scaled to its increase and returned, for the containers in `present`. A container no
/// longer present leaves its pending energy to nobody (`departed`). The time since the mark
/// that no sample covered goes to nobody (`unsampled`), as does a whole increase when
/// nothing was estimated. A counter that went back (a driver reload) restarts the account.
pub fn step(
    acc: &mut GpuEnergy,
    charges: &Charges,
    covered: f64,
    counter: Option<f64>,
    now: f64,
    present: &BTreeSet<EnergyKey>,
) -> Credits {
    acc.pending.add(charges, 1.0);
    acc.pending_joules = acc.pending.total();
    acc.covered_seconds += covered.max(0.0);
    let Some(joules) = counter.filter(|j| j.is_finite()) else {
        return Credits::default();
    };
    let mark = match acc.mark {
        Some(m) if joules >= m.joules && now >= m.at => m,
        // First reading, or the counter (or the clock) went back: a fresh start.
        _ => {
            restart(acc, joules, now);
            return Credits::default();
        }
    };
    if joules == mark.joules {
        return Credits::default();
    }
    let increase = joules - mark.joules;
    let elapsed = now - mark.at;
    let seen = if elapsed > 0.0 {
        (acc.covered_seconds / elapsed).clamp(0.0, 1.0)
    } else {
        1.0
    };
    let pending = std::mem::take(&mut acc.pending);
    restart(acc, joules, now);
    let estimated = pending.total();
    let mut credited = Credits::default();
    if estimated <= 0.0 || seen <= 0.0 {
        to_nobody(acc, Remainder::Unsampled, increase);
        return credited;
    }
    to_nobody(acc, Remainder::Unsampled, increase * (1.0 - seen));
    let scale = increase * seen / estimated;
    let mut departed = 0.0;
    for (r, v) in &pending.split {
        let joules = v * scale;
        match r {
            Recipient::Container(k, _) if !present.contains(k) => departed += joules,
            Recipient::Container(..) => {
                *credited.split.entry(r.clone()).or_default() += joules;
            }
            Recipient::Nobody(reason) => to_nobody(acc, *reason, joules),
        }
    }
    to_nobody(acc, Remainder::Departed, departed);
    let kept = |m: &BTreeMap<EnergyKey, f64>| -> BTreeMap<EnergyKey, f64> {
        m.iter()
            .filter(|(k, _)| present.contains(*k))
            .map(|(k, v)| (k.clone(), v * scale))
            .collect()
    };
    credited.dynamic = kept(&pending.dynamic);
    credited.lower = kept(&pending.lower);
    credited.upper = kept(&pending.upper);
    credited
}

/// A reason's series appears with the first joule it is given, not before.
fn to_nobody(acc: &mut GpuEnergy, reason: Remainder, joules: f64) {
    if joules > 0.0 {
        *acc.remainder.entry(reason).or_default() += joules;
    }
}

fn restart(acc: &mut GpuEnergy, joules: f64, now: f64) {
    acc.mark = Some(CounterMark { joules, at: now });
    acc.pending = Charges::default();
    acc.pending_joules = 0.0;
    acc.covered_seconds = 0.0;
}

#[cfg(test)]
#[path = "ledger_tests.rs"]
mod tests;

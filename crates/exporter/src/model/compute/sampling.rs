//! How far a figure read from part of the window may be from the whole window's.
//!
//! A launch-bound process's probe traces in duty cycles (`crates/probe/src/duty.rs`): which
//! slots of time it traces is a hash of the shared clock, so its traced milliseconds are a
//! random sample of the window's, drawn without replacement, and its figure (covered time over
//! traced time) is an estimate. A bound read from an estimate is not a bound: on the H100
//! corpus bounds of sampled figures around bursty inference tenants held
//! the read's truth in 71–75 % of reads, those of fully traced ones in 97–100 %. The bounds of
//! a sampled figure are widened by [`CONFIDENCE_Z`] standard errors of that estimate.
//!
//! The sample's units are its runs of consecutive counted milliseconds: a traced slot, or
//! adjacent ones merged. Merged slots make fewer, larger units, which can only widen the
//! interval, and hold whatever slot length the probes were configured with
//! (`TESSERA_PROBE_SLOT_MS`). The estimate is a ratio (covered time over traced time, or solo
//! time over covered time), so its variance is the ratio estimator's, with the finite
//! population correction for the share of the window traced.

/// Standard errors either side of a sampled figure: about 99.7 % of samples of a normal
/// estimate fall within, so that the sampling error alone leaves the bounds far less often than
/// the 5 % of reads the accuracy target allows for every cause together.
pub const CONFIDENCE_Z: f64 = 3.0;
/// Fewer runs than this in the sample and its spread says too little to bound anything.
const MIN_UNITS: usize = 4;

/// One run of counted milliseconds: Σ of the denominator's and the numerator's values over it.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
struct Unit {
    base: f64,
    part: f64,
}

/// `CONFIDENCE_Z` standard errors of the ratio Σ`part` / Σ`base` over the milliseconds `counted`
/// picks of `len`, where the picked milliseconds are a random sample of the window's: 0 when
/// it picks them all. `None` when a sample has fewer than [`MIN_UNITS`] runs or no base: then
/// no margin is known.
pub fn ratio_margin(
    len: usize,
    counted: impl Fn(usize) -> bool,
    base: impl Fn(usize) -> f64,
    part: impl Fn(usize) -> f64,
) -> Option<f64> {
    let mut units: Vec<Unit> = Vec::new();
    let mut open = false;
    let mut picked = 0usize;
    for k in 0..len {
        if !counted(k) {
            open = false;
            continue;
        }
        picked += 1;
        if !open {
            units.push(Unit::default());
            open = true;
        }
        if let Some(u) = units.last_mut() {
            u.base += base(k);
            u.part += part(k);
        }
    }
    if picked == len {
        return Some(0.0);
    }
    let n = units.len();
    let base_total: f64 = units.iter().map(|u| u.base).sum();
    if n < MIN_UNITS || base_total <= 0.0 || len == 0 {
        return None;
    }
    let ratio = units.iter().map(|u| u.part).sum::<f64>() / base_total;
    let mean_base = base_total / n as f64;
    let spread = units
        .iter()
        .map(|u| (u.part - ratio * u.base).powi(2))
        .sum::<f64>()
        / (n - 1) as f64;
    let unsampled = (1.0 - picked as f64 / len as f64).max(0.0);
    let variance = unsampled * spread / (n as f64 * mean_base * mean_base);
    Some(CONFIDENCE_Z * variance.sqrt())
}

/// The mean of the readings taken in `(end - seconds, end]` (each covers the sampler's
/// interval before it; with no window, the one at `end`); `None` where none was.
pub(super) fn mean_between(readings: &[(f64, f64)], end: f64, seconds: f64) -> Option<f64> {
    let inside: Vec<f64> = readings
        .iter()
        .filter(|(t, _)| *t <= end && end - *t < seconds.max(f64::EPSILON))
        .map(|(_, a)| *a)
        .collect();
    (!inside.is_empty()).then(|| inside.iter().sum::<f64>() / inside.len() as f64)
}

#[cfg(test)]
#[path = "sampling_tests.rs"]
mod tests;

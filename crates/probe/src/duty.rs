//! Tracing in duty cycles, so that a launch-bound process pays for kernel records only part of
//! the time.
//!
//! What duty cycles save is smaller than it looks. Measured inside one process on the H100
//! (docs/validation.md, "Where the probe's launch cost comes from"), CUPTI attached with kernel
//! records never turned on costs a launch nothing, but once records have been on, a launch
//! costs 1–2 µs more whether they are on or off, as if CUPTI kept its instrumentation until it
//! is finalized. Turning records off saves only their own part (0.1–0.7 µs a launch) and the
//! probe's work on them. So the governor below bounds that part by the budget; the rest is
//! paid by every process the probe traces at all.
//!
//! Each probe estimates what full tracing costs its process — kernels per traced second × a
//! per-launch cost — and, past the budget, traces only a fraction of the time. Which slots of
//! time are traced is a function of the shared CUPTI clock alone, nested across fractions:
//! every process tracing at least a fraction `f` traces the slots a process at `f` traces, so
//! tenants time-sliced on one GPU always have common traced milliseconds to be split by (see
//! tessera's `model::compute`).
//!
//! A process whose own kernels keep the GPU busy is traced in full whatever its launch rate:
//! its launches run ahead of the GPU, so their cost delays nothing.

/// Length of one slot of the schedule. Long beside a launch (the queue at a slot's start is
/// short in a launch-bound process), short beside a second (a window holds many slots).
pub const DEFAULT_SLOT_NS: u64 = 20_000_000;
/// Per-launch cost that tracing in duty cycles saves: the records' own part on the launching
/// thread, 0.1–0.7 µs on the H100 (docs/validation.md, "Where the probe's launch cost comes
/// from"), taken at its top. The rest of tracing's 1.5–1.7 µs a launch stays once records have
/// been on, traced or not, so it cannot weigh on whether to trace. Charging the whole cost, as
/// the governor did, sampled every heavy resnet50 tenant of the H200 corpus for a saving of
/// at most 0.7 µs a launch, and a draw where any probe samples reads within 10 % of the truth in
/// 82–96 % of reads against 99–100 % where none does (time-sliced and MPS).
pub const LAUNCH_COST_NS: f64 = 700.0;
/// Default share of the process's time that the records' own part may cost it before the probe
/// traces in duty cycles (the standing cost of records having been on comes on top).
pub const DEFAULT_BUDGET: f64 = 0.02;
/// Never trace less than this: a window must still hold traced time.
pub const MIN_FRACTION: f64 = 1.0 / 32.0;
/// Kernel coverage of traced time at which the GPU, not the launching thread, sets the pace.
const GPU_BOUND_COVERAGE: f64 = 0.9;
/// Too little traced time to judge a rate from: keep the fraction.
const MIN_TRACED_NS: u64 = 10_000_000;

/// Whether `slot` (CUPTI ns / `SLOT_NS`) is traced at `fraction`. A hash spreads the traced
/// slots so that no periodic workload always falls in or out of them.
pub fn slot_traced(slot: u64, fraction: f64) -> bool {
    if fraction >= 1.0 {
        return true;
    }
    let mut z = slot.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^= z >> 31;
    ((z >> 11) as f64 / (1u64 << 53) as f64) < fraction
}

/// Picks the traced fraction from what the last interval's traced time showed.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Governor {
    /// Share of the process's time tracing in full may cost it, 0 < budget <= 1.
    pub budget: f64,
    pub fraction: f64,
}

impl Governor {
    pub const fn new(budget: f64) -> Self {
        Governor {
            budget,
            fraction: 1.0,
        }
    }

    /// `kernels`, `traced_ns` and `busy_ns` over the last interval; returns the new fraction,
    /// a power of two between `MIN_FRACTION` and 1.
    pub fn update(&mut self, kernels: u64, traced_ns: u64, busy_ns: u64) -> f64 {
        if kernels == 0 {
            // Nothing launched while traced: tracing costs nothing, and a process that went
            // quiet must be seen quiet at once.
            self.fraction = 1.0;
        } else if traced_ns >= MIN_TRACED_NS {
            let coverage = busy_ns as f64 / traced_ns as f64;
            let cost = kernels as f64 * LAUNCH_COST_NS / traced_ns as f64;
            self.fraction = if coverage >= GPU_BOUND_COVERAGE || cost <= self.budget {
                1.0
            } else {
                let mut f = 1.0;
                while f * cost > self.budget && f > MIN_FRACTION {
                    f /= 2.0;
                }
                f
            };
        }
        self.fraction
    }
}

/// The budget from `TESSERA_PROBE_OVERHEAD` (a share, 0 < x <= 1; 1 traces always).
pub fn budget_from(value: Option<&str>) -> f64 {
    value
        .and_then(|v| v.trim().parse::<f64>().ok())
        .filter(|b| *b > 0.0 && *b <= 1.0)
        .unwrap_or(DEFAULT_BUDGET)
}

#[cfg(test)]
#[path = "duty_tests.rs"]
mod tests;

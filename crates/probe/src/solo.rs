//! How long a kernel takes when it has the GPU to itself. Under time-slicing a kernel's span
//! stretches over the other tenants' slices and the switches between them; the same kernel
//! (same function, same launch shape) run alone takes its usual unstretched time. Measured on
//! the H100: two 40 % tenants kept the device 100 % busy for 79 % of real work, so spans
//! alone overstate each tenant even after an even split.
//!
//! The estimate is the running mean of the runs near the fastest mode, not the minimum: the
//! minimum of thousands of runs sits well below a typical solo run (clocks, caches) and made
//! every time-sliced tenant read 8–10 % low on the H100.
//!
//! A kernel replayed from a CUDA graph is known by its graph node too. cuBLAS's persistent
//! kernels launch one grid whatever the matrix size, so one function and launch shape serve
//! several GEMMs of a model: their runs differ by 2× with nothing stretched, and the mean near
//! the fastest mode read an honest graph tenant alone at 0.92 of its spans on the H100
//! (issue 32). A graph node is one GEMM of one size.

use std::collections::BTreeMap;

/// What identifies "the same kernel": its function and how it was launched.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct KernelShape {
    /// CUPTI's pointer to the function name: stable for one function in one process.
    pub name: u64,
    pub grid: [u32; 3],
    pub block: [u32; 3],
    pub dynamic_shared: u32,
    /// CUPTI's id of the graph node that launched it; 0 outside CUDA graphs.
    pub graph_node: u64,
}

/// An estimate forgotten after this long without a run near it, so a kernel that got slower
/// for good (clocks, data) is not held to an old best.
const CONFIRM_WITHIN_NS: u64 = 30_000_000_000;
/// Runs within this factor either side of the estimate are solo runs and refine it; a run
/// faster than that starts a new, faster estimate; a slower one was stretched.
const SOLO_BAND: f64 = 1.15;
/// Weight of one solo run in the running mean.
const SOLO_WEIGHT: f64 = 1.0 / 16.0;
/// Shapes remembered; past this the table starts over (a process with endless shapes only
/// loses the correction, never correctness of the spans). A decoder's graphs hold a few
/// hundred kernel nodes per captured batch size.
const MAX_SHAPES: usize = 16_384;

#[derive(Debug, Default)]
pub struct SoloDurations {
    /// Shape → (estimate ns, end of the last solo run).
    best: BTreeMap<KernelShape, (f64, u64)>,
}

impl SoloDurations {
    pub const fn new() -> Self {
        SoloDurations {
            best: BTreeMap::new(),
        }
    }

    /// The solo-equivalent duration of a kernel that ran `duration` ns, ending at `end` ns:
    /// never more than `duration`.
    pub fn observe(&mut self, shape: KernelShape, duration: u64, end: u64) -> u64 {
        if !self.best.contains_key(&shape) && self.best.len() >= MAX_SHAPES {
            self.best.clear();
        }
        let d = duration as f64;
        let e = self.best.entry(shape).or_insert((d, end));
        let (est, confirmed) = *e;
        if d * SOLO_BAND < est || end.saturating_sub(confirmed) > CONFIRM_WITHIN_NS {
            *e = (d, end);
        } else if d <= est * SOLO_BAND {
            *e = (est + (d - est) * SOLO_WEIGHT, end);
        }
        (e.0.round() as u64).min(duration)
    }
}

#[cfg(test)]
#[path = "solo_tests.rs"]
mod tests;

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
//! the fastest mode read an honest graph tenant alone at 0.92 of its spans on the H100. A
//! graph node is one GEMM of one size.
//!
//! Outside graphs the kernels launched just before tell the sizes apart ([`LaunchContext`]): an
//! eager model's layer norms and element-wise kernels launch grids that follow the batch, so
//! the same persistent GEMM after the batch-16 layer norm is another kernel than after the
//! batch-2 one. Keyed by shape alone, an eager 6-layer encoder serving batches of 2, 8 and 16
//! read 0.38 of its spans alone and 0.40 of its kernel time time-sliced (H200 corpus); keyed
//! by the two shapes before it, 0.91–1.00 alone and −5 % time-sliced.
//!
//! Each run counts twice ([`Solo`]): as what it took when it ran within the band of the
//! estimate (it was not stretched: counting the estimate would lose every run's spread above
//! it, 1–7 % of an honest tenant alone), else as the estimate; and as a floor, at most the
//! estimate, which the bounds take.

use std::collections::BTreeMap;
use std::hash::{BuildHasher, BuildHasherDefault, DefaultHasher};

/// What identifies "the same kernel": its function and how it was launched.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct KernelShape {
    /// CUPTI's pointer to the function name: stable for one function in one process.
    pub name: u64,
    pub grid: [u32; 3],
    pub block: [u32; 3],
    pub dynamic_shared: u32,
    /// CUPTI's id of the graph node that launched it; 0 outside CUDA graphs.
    pub graph_node: u64,
    /// Outside graphs, the shapes of the two kernels before it ([`LaunchContext`]); 0 in a
    /// graph, whose node already tells one GEMM from another.
    pub context: u64,
}

impl KernelShape {
    /// The launch shape alone, as the record log names it.
    pub fn without_context(self) -> KernelShape {
        KernelShape { context: 0, ..self }
    }
}

/// The kernels just before each one, in the order the probe folds records in.
#[derive(Debug, Default)]
pub struct LaunchContext {
    previous: [u64; 2],
}

impl LaunchContext {
    pub const fn new() -> Self {
        LaunchContext { previous: [0; 2] }
    }

    /// `shape` with its context set, and remembered as the newest kernel.
    pub fn place(&mut self, shape: KernelShape) -> KernelShape {
        let own = BuildHasherDefault::<DefaultHasher>::default().hash_one(shape);
        let context = if shape.graph_node == 0 {
            // Nonzero, so that a kernel after nothing is told from a graph's.
            self.previous[0].rotate_left(17) ^ self.previous[1] | 1
        } else {
            0
        };
        self.previous = [self.previous[1], own];
        KernelShape { context, ..shape }
    }
}

/// What one run counts, in ns: `solo` its run where that was not stretched, else the estimate;
/// `floor` never more than the estimate.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Solo {
    pub solo: u64,
    pub floor: u64,
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
    /// The kernels folded in just before, which place each new one ([`LaunchContext`]).
    pub launches: LaunchContext,
}

impl SoloDurations {
    pub const fn new() -> Self {
        SoloDurations {
            best: BTreeMap::new(),
            launches: LaunchContext::new(),
        }
    }

    /// What a kernel that ran `duration` ns, ending at `end` ns, counts: never more than
    /// `duration`.
    pub fn observe(&mut self, shape: KernelShape, duration: u64, end: u64) -> Solo {
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
        let est = e.0;
        let floor = (est.round() as u64).min(duration);
        let solo = if d <= est * SOLO_BAND {
            duration
        } else {
            floor
        };
        Solo { solo, floor }
    }
}

#[cfg(test)]
#[path = "solo_tests.rs"]
mod tests;

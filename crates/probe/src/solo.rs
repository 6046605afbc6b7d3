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
mod tests {
    use super::*;

    fn shape(name: u64) -> KernelShape {
        node(name, 0)
    }

    fn node(name: u64, graph_node: u64) -> KernelShape {
        KernelShape {
            name,
            grid: [64, 1, 1],
            block: [256, 1, 1],
            dynamic_shared: 0,
            graph_node,
        }
    }

    #[test]
    fn graph_nodes_of_one_function_keep_their_own_durations() {
        // One persistent GEMM kernel serving two matrix sizes (7 µs and 15 µs), alternating,
        // nothing stretched: without the node each 15 µs run counts the 7 µs mode.
        let (mut by_shape, mut by_node) = (SoloDurations::new(), SoloDurations::new());
        let (mut shape_sum, mut node_sum, mut spans) = (0, 0, 0);
        for i in 0..400u64 {
            let (d, n) = if i % 2 == 0 { (7_000, 1) } else { (15_000, 2) };
            shape_sum += by_shape.observe(shape(9), d, i * 20_000);
            node_sum += by_node.observe(node(9, n), d, i * 20_000);
            spans += d;
        }
        assert!(shape_sum * 100 < spans * 80, "{shape_sum} of {spans}");
        assert!(node_sum * 100 > spans * 99, "{node_sum} of {spans}");
    }

    #[test]
    fn a_stretched_kernel_counts_its_usual_solo_duration() {
        let mut s = SoloDurations::new();
        let ms = 1_000_000;
        assert_eq!(s.observe(shape(1), 1_500_000, ms), 1_500_000);
        // Time-sliced against another tenant: the span doubles, the work does not.
        assert_eq!(s.observe(shape(1), 3_100_000, 2 * ms), 1_500_000);
        // Solo runs a little either side refine a mean, not a minimum.
        for i in 0..200 {
            let d = if i % 2 == 0 { 1_400_000 } else { 1_600_000 };
            s.observe(shape(1), d, (3 + i) * ms);
        }
        let est = s.observe(shape(1), 3_000_000, 300 * ms);
        assert!((1_450_000..=1_550_000).contains(&est), "{est}");
        // A run never counts more than it took.
        assert_eq!(s.observe(shape(1), 1_460_000, 301 * ms), 1_460_000);
        // Another shape is its own kernel.
        assert_eq!(s.observe(shape(2), 3_100_000, 4 * ms), 3_100_000);
    }

    #[test]
    fn a_first_stretched_run_gives_way_to_the_solo_mode() {
        let mut s = SoloDurations::new();
        let ms = 1_000_000;
        assert_eq!(s.observe(shape(1), 3_000_000, ms), 3_000_000);
        assert_eq!(s.observe(shape(1), 1_500_000, 2 * ms), 1_500_000);
        assert_eq!(s.observe(shape(1), 3_000_000, 3 * ms), 1_500_000);
    }

    #[test]
    fn an_unconfirmed_estimate_is_forgotten() {
        let mut s = SoloDurations::new();
        let sec = 1_000_000_000;
        s.observe(shape(1), 1_000_000, 0);
        // Near the estimate: confirms it.
        assert_eq!(s.observe(shape(1), 1_000_000, 20 * sec), 1_000_000);
        // Always slower since, for longer than the confirmation window: the new run stands.
        assert_eq!(s.observe(shape(1), 2_000_000, 40 * sec), 1_000_000);
        assert_eq!(s.observe(shape(1), 2_000_000, 51 * sec), 2_000_000);
    }

    #[test]
    fn the_table_is_bounded() {
        let mut s = SoloDurations::new();
        for i in 0..(MAX_SHAPES as u64 + 5) {
            s.observe(shape(i), 10, i);
        }
        assert!(s.best.len() <= MAX_SHAPES);
    }
}

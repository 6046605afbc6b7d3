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

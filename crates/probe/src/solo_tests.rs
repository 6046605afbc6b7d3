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
        context: 0,
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
        shape_sum += by_shape.observe(shape(9), d, i * 20_000).solo;
        node_sum += by_node.observe(node(9, n), d, i * 20_000).solo;
        spans += d;
    }
    assert!(shape_sum * 100 < spans * 80, "{shape_sum} of {spans}");
    assert!(node_sum * 100 > spans * 99, "{node_sum} of {spans}");
}

#[test]
fn a_stretched_kernel_counts_its_usual_solo_duration() {
    let mut s = SoloDurations::new();
    let ms = 1_000_000;
    assert_eq!(s.observe(shape(1), 1_500_000, ms).solo, 1_500_000);
    // Time-sliced against another tenant: the span doubles, the work does not.
    assert_eq!(s.observe(shape(1), 3_100_000, 2 * ms).solo, 1_500_000);
    // Solo runs a little either side refine a mean, not a minimum.
    for i in 0..200 {
        let d = if i % 2 == 0 { 1_400_000 } else { 1_600_000 };
        s.observe(shape(1), d, (3 + i) * ms);
    }
    let est = s.observe(shape(1), 3_000_000, 300 * ms).solo;
    assert!((1_450_000..=1_550_000).contains(&est), "{est}");
    // A run never counts more than it took.
    assert_eq!(s.observe(shape(1), 1_460_000, 301 * ms).solo, 1_460_000);
    // Another shape is its own kernel.
    assert_eq!(s.observe(shape(2), 3_100_000, 4 * ms).solo, 3_100_000);
}

#[test]
fn a_first_stretched_run_gives_way_to_the_solo_mode() {
    let mut s = SoloDurations::new();
    let ms = 1_000_000;
    assert_eq!(s.observe(shape(1), 3_000_000, ms).solo, 3_000_000);
    assert_eq!(s.observe(shape(1), 1_500_000, 2 * ms).solo, 1_500_000);
    assert_eq!(s.observe(shape(1), 3_000_000, 3 * ms).solo, 1_500_000);
}

#[test]
fn an_unconfirmed_estimate_is_forgotten() {
    let mut s = SoloDurations::new();
    let sec = 1_000_000_000;
    s.observe(shape(1), 1_000_000, 0);
    // Near the estimate: confirms it.
    assert_eq!(s.observe(shape(1), 1_000_000, 20 * sec).solo, 1_000_000);
    // Always slower since, for longer than the confirmation window: the new run stands.
    assert_eq!(s.observe(shape(1), 2_000_000, 40 * sec).solo, 1_000_000);
    assert_eq!(s.observe(shape(1), 2_000_000, 51 * sec).solo, 2_000_000);
}

#[test]
fn the_table_is_bounded() {
    let mut s = SoloDurations::new();
    for i in 0..(MAX_SHAPES as u64 + 5) {
        s.observe(shape(i), 10, i);
    }
    assert!(s.best.len() <= MAX_SHAPES);
}

#[test]
fn a_run_within_the_band_counts_what_it_took_and_its_floor_at_most_the_estimate() {
    let mut s = SoloDurations::new();
    let ms = 1_000_000;
    s.observe(shape(1), 1_000_000, ms);
    // 10 % slower: not stretched, all of it counts; the floor stays at the estimate.
    let slow = s.observe(shape(1), 1_100_000, 2 * ms);
    assert_eq!(slow.solo, 1_100_000);
    assert!(
        slow.floor < 1_100_000 && slow.floor >= 1_000_000,
        "{slow:?}"
    );
    // Stretched past the band: both count the estimate.
    let stretched = s.observe(shape(1), 3_000_000, 3 * ms);
    assert_eq!(stretched.solo, stretched.floor);
    assert!(stretched.solo < 1_100_000, "{stretched:?}");
    // Faster than the estimate: both what it took.
    let fast = s.observe(shape(1), 950_000, 4 * ms);
    assert_eq!((fast.solo, fast.floor), (950_000, 950_000));
}

#[test]
fn the_kernels_before_an_eager_gemm_tell_its_sizes_apart() {
    // An eager encoder's layer, as on the H200: a layer norm whose grid follows the batch,
    // then one persistent GEMM kernel (one grid for every size): 40 µs at batch 2, 300 µs at
    // batch 16, requests of either size in turn, nothing stretched.
    let gemm = shape(7);
    let norm = |batch: u32| KernelShape {
        grid: [batch * 512, 1, 1],
        ..shape(5)
    };
    let (mut plain, mut placed) = (SoloDurations::new(), SoloDurations::new());
    let (mut plain_sum, mut placed_sum, mut spans) = (0, 0, 0);
    for i in 0..600u64 {
        let (batch, d) = if (i / 3) % 2 == 0 {
            (2, 40_000)
        } else {
            (16, 300_000)
        };
        for (k, (s, d)) in [(norm(batch), 5_000), (gemm, d)].into_iter().enumerate() {
            let end = i * 1_000_000 + k as u64 * 400_000;
            plain_sum += plain.observe(s, d, end).solo;
            let s = placed.launches.place(s);
            placed_sum += placed.observe(s, d, end).solo;
            spans += d;
        }
    }
    assert!(plain_sum * 100 < spans * 60, "{plain_sum} of {spans}");
    assert!(placed_sum * 100 > spans * 99, "{placed_sum} of {spans}");
}

#[test]
fn a_graph_kernel_is_placed_by_its_node_not_by_what_ran_before() {
    let mut l = LaunchContext::new();
    let a = l.place(shape(1));
    let b = l.place(shape(2));
    assert!(a.context != 0 && b.context != 0 && a.context != b.context);
    assert_eq!(l.place(node(3, 42)).context, 0);
    assert_eq!(b.without_context(), shape(2));
}

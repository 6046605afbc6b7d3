use super::*;

#[test]
fn schedules_nest_and_hit_their_fraction() {
    let slots = 0..200_000u64;
    for f in [0.5, 0.25, 1.0 / 32.0] {
        let traced = slots.clone().filter(|s| slot_traced(*s, f)).count();
        let share = traced as f64 / 200_000.0;
        assert!((share - f).abs() < 0.01 * f.max(0.1), "{f}: {share}");
        // Every slot traced at f is traced at 2f: tenants at different fractions share
        // the smaller one's slots.
        assert!(slots
            .clone()
            .filter(|s| slot_traced(*s, f))
            .all(|s| slot_traced(s, (2.0 * f).min(1.0))));
    }
    assert!(slots.clone().all(|s| slot_traced(s, 1.0)));
}

#[test]
fn a_periodic_workload_is_not_aliased() {
    // A process busy for the first half of every 100 ms (five slots): whatever the
    // schedule, the traced slots must see about half busy.
    let f = 1.0 / 8.0;
    let (mut busy, mut all) = (0, 0);
    for s in (0..400_000u64).filter(|s| slot_traced(*s, f)) {
        all += 1;
        busy += usize::from(s % 5 < 2 || (s % 5 == 2 && s % 2 == 0));
    }
    let share = busy as f64 / all as f64;
    assert!((share - 0.5).abs() < 0.02, "{share}");
}

#[test]
fn the_governor_throttles_only_a_launch_bound_process() {
    let second = 1_000_000_000;
    // 120k launches a second, GPU 40 % covered: what records cost that slots save, 8 %.
    let mut g = Governor::new(DEFAULT_BUDGET);
    let f = g.update(120_000, second, 400_000_000);
    assert!((MIN_FRACTION..=0.125).contains(&f), "{f}");
    assert!(f * 120_000.0 * LAUNCH_COST_NS / second as f64 <= DEFAULT_BUDGET);
    // A resnet50 server at 20k launches a second saves at most 1.4 % by slots: traced in full.
    assert_eq!(g.update(20_000, second, 400_000_000), 1.0);
    // Matmuls: a few hundred launches a second cost nothing.
    assert_eq!(g.update(340, second, 480_000_000), 1.0);
    // The same launch rate with the GPU kept busy: launches run ahead, trace in full.
    assert_eq!(g.update(120_000, second, 950_000_000), 1.0);
    // Throttled, then quiet: back to full tracing at once.
    g.update(120_000, second, 400_000_000);
    assert_eq!(g.update(0, 30_000_000, 0), 1.0);
    // Too little traced time to judge: the fraction stays.
    g.update(120_000, second, 400_000_000);
    let before = g.fraction;
    assert_eq!(g.update(5, 1_000_000, 0), before);
    // Never below the floor, however fast the launches.
    assert_eq!(g.update(10_000_000, second, 0), MIN_FRACTION);
}

#[test]
fn the_budget_takes_only_a_share() {
    assert_eq!(budget_from(Some("0.05")), 0.05);
    assert_eq!(budget_from(Some("1")), 1.0);
    for bad in ["0", "-1", "2", "lots", ""] {
        assert_eq!(budget_from(Some(bad)), DEFAULT_BUDGET, "{bad}");
    }
    assert_eq!(budget_from(None), DEFAULT_BUDGET);
}

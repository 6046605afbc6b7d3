use super::*;

fn line(covered: &[f64], traced: &[bool]) -> ProbeTimeline {
    ProbeTimeline {
        covered: covered.to_vec(),
        solo: covered.to_vec(),
        traced: traced.to_vec(),
        floor: Vec::new(),
    }
}

#[test]
fn held_time_is_read_where_another_tenant_traced_too() {
    let t = [true; 8];
    // Whole milliseconds: two beside another's kernels, two where the other traced nothing
    // running, two where the other did not trace at all (they do not count either way).
    let long = line(&[1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 0.0, 0.0], &t);
    let short = line(
        &[0.2, 0.2, 0.0, 0.0, 0.0, 0.0, 0.3, 0.0],
        &[true, true, true, true, false, false, true, true],
    );
    let held = held_by_others(&[&long, &short]);
    assert_eq!(
        held[0],
        Held {
            share: 0.5,
            ms: 2.0
        }
    );
    assert_eq!(held[1], Held::default(), "short kernels hold nobody");
    // Alone, nothing is seen held.
    assert_eq!(held_by_others(&[&long]), vec![Held::default()]);
}

#[test]
fn timelines_that_do_not_line_up_are_not_read_side_by_side() {
    let a = line(&[1.0; 4], &[true; 4]);
    let short = line(&[1.0; 3], &[true; 2]);
    let timelines = HashMap::from([(1, a.clone()), (2, short.clone())]);
    assert!(aligned(&[(1, 1.0), (2, 1.0)], &timelines).is_none());
    assert!(aligned(&[(1, 1.0), (3, 1.0)], &timelines).is_none());
    // Read anyway, ragged lines are cut to the shortest, not indexed past their end.
    let held = held_by_others(&[&a, &short]);
    assert_eq!(held[0].ms, 2.0);
}

#[test]
fn floors_and_ceilings_bound_each_tenant_of_a_contended_millisecond() {
    // A stretched around B in every millisecond: A covers it whole, its solo parts explain 0.4
    // (floor 0.35); B's kernels ran 0.6 of it (floor 0.55).
    let n = 100;
    let a = ProbeTimeline {
        covered: vec![1.0; n],
        solo: vec![0.4; n],
        traced: vec![true; n],
        floor: vec![0.35; n],
    };
    let b = ProbeTimeline {
        covered: vec![0.6; n],
        solo: vec![0.6; n],
        traced: vec![true; n],
        floor: vec![0.55; n],
    };
    let probed = [(1, 1.0), (2, 0.6)];
    let stages = timeline_shares(&probed, &[&a, &b], &[], false).unwrap();
    let close = |x: f64, y: f64| (x - y).abs() < 1e-9;
    let (sa, sb) = (stages[0].1, stages[1].1);
    assert!(
        close(sa.share, 0.4) && close(sb.share, 0.6),
        "{sa:?} {sb:?}"
    );
    assert!(
        close(sa.floor_own, 0.35) && close(sb.floor_own, 0.55),
        "{sa:?} {sb:?}"
    );
    // One context runs at a time: A ran at most what B's floor leaves of the millisecond.
    assert!(
        close(sa.ceiling, 0.45) && close(sb.ceiling, 0.6),
        "{sa:?} {sb:?}"
    );
    assert_eq!(solo_excess(&[&a, &b], &[]), Some(0.0));
    // Under MPS kernels run side by side: the ceiling is the covered time.
    let side = timeline_shares(&probed, &[&a, &b], &[], true).unwrap();
    assert!(close(side[0].1.ceiling, 1.0) && close(side[0].1.floor_own, 0.35));
}

#[test]
fn solo_estimates_that_miss_alone_are_scaled_where_the_millisecond_is_shared() {
    // A ran 100 ms alone, its solo estimates explaining 0.8 of them (kernels of one shape
    // whose durations differ: the estimate near the fastest misses the long runs); B ran 100
    // ms alone at half a millisecond each, estimates exact. Then 100 ms shared, each covering
    // them whole with solo parts of 0.4.
    let mut a = ProbeTimeline::default();
    let mut b = ProbeTimeline::default();
    let push = |t: &mut ProbeTimeline, c: f64, s: f64| {
        t.covered.push(c);
        t.solo.push(s);
        t.traced.push(true);
    };
    for _ in 0..100 {
        push(&mut a, 1.0, 0.8);
        push(&mut b, 0.0, 0.0);
    }
    for _ in 0..100 {
        push(&mut a, 0.0, 0.0);
        push(&mut b, 0.5, 0.5);
    }
    for _ in 0..100 {
        push(&mut a, 1.0, 0.4);
        push(&mut b, 1.0, 0.4);
    }
    let close = |x: f64, y: f64| (x - y).abs() < 1e-9;
    let scales = lone_scales(&[&a, &b], &[]);
    assert!(
        close(scales[0], 1.25) && close(scales[1], 1.0),
        "{scales:?}"
    );
    let stages = timeline_shares(&[(1, 0.8), (2, 0.5)], &[&a, &b], &[], false).unwrap();
    let (sa, sb) = (stages[0].1, stages[1].1);
    // A: 100 ms alone, and 0.4 × 1.25 of each shared one; B keeps its 0.4.
    assert!(close(sa.share, 0.5) && close(sa.lone_scale, 1.25), "{sa:?}");
    assert!(close(sb.share, 0.3) && close(sb.lone_scale, 1.0), "{sb:?}");
    assert!(close(sa.own_by_solo, 140.0 / 300.0), "{sa:?}");
    assert!(sa.floor_own <= sa.share && sa.share <= sa.ceiling, "{sa:?}");
    // Scaled parts that overrun the millisecond are fitted back into it.
    let mut c = a.clone();
    c.solo[200..].iter_mut().for_each(|s| *s = 0.7);
    let stages = timeline_shares(&[(1, 0.8), (2, 0.5)], &[&c, &b], &[], false).unwrap();
    let per_ms = 0.875 / (0.875 + 0.4);
    assert!(close(stages[0].1.share, (100.0 + 100.0 * per_ms) / 300.0));
    // Too little time alone says nothing; nor is anything scaled under MPS.
    let short = ProbeTimeline {
        covered: a.covered[60..].to_vec(),
        solo: a.solo[60..].to_vec(),
        traced: a.traced[60..].to_vec(),
        floor: Vec::new(),
    };
    let b_short = ProbeTimeline {
        covered: b.covered[60..].to_vec(),
        solo: b.solo[60..].to_vec(),
        traced: b.traced[60..].to_vec(),
        floor: Vec::new(),
    };
    assert_eq!(lone_scales(&[&short, &b_short], &[]), vec![1.0, 1.0]);
    let side = timeline_shares(&[(1, 0.8), (2, 0.5)], &[&a, &b], &[], true).unwrap();
    assert!(close(side[0].1.lone_scale, 1.0));
}

/// A 16k-GEMM-like tenant A whose kernels outlast time slices, beside a launch-bound B: per
/// 30-ms period, A spans 20 whole milliseconds with its solo duration spread evenly over them
/// (B's slices interrupt the second half), then runs 10 milliseconds of short kernels alone.
fn outlasting_pair(periods: usize) -> (ProbeTimeline, ProbeTimeline) {
    let (mut a, mut b) = (line(&[], &[]), line(&[], &[]));
    let push = |l: &mut ProbeTimeline, c: f64, s: f64| {
        l.covered.push(c);
        l.solo.push(s);
        l.traced.push(true);
    };
    for _ in 0..periods {
        for ms in 0..30 {
            match ms {
                0..10 => (push(&mut a, 1.0, 0.6), push(&mut b, 0.0, 0.0)),
                10..20 => (push(&mut a, 1.0, 0.6), push(&mut b, 0.3, 0.3)),
                _ if ms % 2 == 0 => (push(&mut a, 0.5, 0.45), push(&mut b, 0.0, 0.0)),
                _ => (push(&mut a, 0.45, 0.4), push(&mut b, 0.0, 0.0)),
            };
        }
    }
    (a, b)
}

#[test]
fn a_kernel_spread_over_others_slices_does_not_scale_its_tenant_up() {
    let (a, b) = outlasting_pair(20);
    let held = held_by_others(&[&a, &b]);
    assert!(
        held[0].outlasts_slices() && !held[1].outlasts_slices(),
        "{held:?}"
    );
    let close = |x: f64, y: f64| (x - y).abs() < 1e-9;
    // Over every lone millisecond, the spread kernel's read its span 1/0.6 past its solo parts,
    // though it ran undisturbed there: the scale would take A up by 44 %.
    let naive = lone_scales(&[&a, &b], &[]);
    assert!(close(naive[0], 295.0 / 205.0), "{naive:?}");
    // Without its spread kernels, A's lone time is its short kernels': 95 ms over 85 of solo.
    let scales = lone_scales(&[&a, &b], &held);
    assert!(
        close(scales[0], 95.0 / 85.0) && close(scales[1], 1.0),
        "{scales:?}"
    );
    let unspread = unspread_lone_time(&[&a, &b]);
    assert!(close(unspread.covered[0], 95.0) && close(unspread.solo[0], 85.0));
    // Three whole milliseconds of one solo value are a spread kernel; two are not.
    let two = line(&[1.0, 1.0, 0.3], &[true; 3]);
    let two = ProbeTimeline {
        solo: vec![0.6, 0.6, 0.3],
        ..two
    };
    assert_eq!(spread(&two, 3), vec![false; 3]);
}

#[test]
fn clean_runs_leave_out_kernels_that_shared_a_millisecond_with_another_tenant() {
    let (a, b) = outlasting_pair(20);
    let clean = clean_lone_time(&[&a, &b]);
    let lone = lone_time(&[&a, &b]);
    let close = |x: f64, y: f64| (x - y).abs() < 1e-9;
    // A covers every millisecond of the period, so each run of it touches B's: no clean run.
    assert!(close(clean.covered[0], 0.0), "{clean:?}");
    assert!(lone.covered[0] > 290.0);
    // A run with a free millisecond either side is clean; one next to B's kernel is not.
    let t = [true; 9];
    let x = line(&[0.0, 0.8, 0.8, 0.0, 0.0, 0.0, 0.7, 0.0, 0.0], &t);
    let y = line(&[0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.4, 0.0], &t);
    let clean = clean_lone_time(&[&x, &y]);
    assert!(
        close(clean.covered[0], 1.6) && close(clean.covered[1], 0.0),
        "{clean:?}"
    );
    assert_eq!(clean.common, 9);
}

#[test]
fn spread_solo_parts_that_overlap_are_summed_over_blocks_where_kernels_outlast_slices() {
    // Two interrupted kernels, each spreading 36 ms of solo time over a 60-ms span; their
    // spans overlap for 20 ms, where the solo parts add to 1.2 a millisecond.
    let n = 1000;
    let mk = |from: usize, to: usize, s: f64| {
        let mut l = line(&[0.0; 1000], &[true; 1000]);
        for k in 0..n {
            if (from..to).contains(&(k % 100)) {
                l.covered[k] = 1.0;
                l.solo[k] = s;
            }
        }
        l
    };
    let (a, b) = (mk(0, 60, 0.6), mk(40, 100, 0.6));
    let held = [
        Held {
            share: 1.0,
            ms: 600.0,
        },
        Held {
            share: 1.0,
            ms: 600.0,
        },
    ];
    let per_ms = solo_excess(&[&a, &b], &[]).unwrap();
    assert!((per_ms - 0.04).abs() < 1e-9, "{per_ms}");
    assert_eq!(solo_excess(&[&a, &b], &held), Some(0.0));
    // A claim of the whole span as solo still exceeds its block: the check still reads lies.
    let (la, lb) = (mk(0, 60, 1.0), mk(40, 100, 1.0));
    let lie = solo_excess(&[&la, &lb], &held).unwrap();
    assert!((lie - 0.2).abs() < 1e-9, "{lie}");
}

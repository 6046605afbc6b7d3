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
    assert_eq!(solo_excess(&[&a, &b]), Some(0.0));
    // Under MPS kernels run side by side: the ceiling is the covered time.
    let side = timeline_shares(&probed, &[&a, &b], &[], true).unwrap();
    assert!(close(side[0].1.ceiling, 1.0) && close(side[0].1.floor_own, 0.35));
}

use super::*;

fn line(covered: &[f64], traced: &[bool]) -> ProbeTimeline {
    ProbeTimeline {
        covered: covered.to_vec(),
        solo: covered.to_vec(),
        traced: traced.to_vec(),
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

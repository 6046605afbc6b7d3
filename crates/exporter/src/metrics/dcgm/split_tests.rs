use super::*;

fn sum(s: &[(Owner, f64)]) -> f64 {
    s.iter().map(|(_, v)| v).sum()
}

#[test]
fn an_exclusive_holder_gets_the_device_value() {
    assert_eq!(split(0.7, Some(0), &[None]), vec![(Owner::Holder(0), 0.7)]);
}

#[test]
fn known_tenants_and_a_remainder_sum_to_the_device() {
    let s = split(0.9, None, &[Some(0.5), Some(0.25)]);
    assert_eq!(
        s,
        vec![
            (Owner::Holder(0), 0.5),
            (Owner::Holder(1), 0.25),
            (Owner::Remainder, 0.15)
        ]
    );
    assert!((sum(&s) - 0.9).abs() < 1e-12);
}

#[test]
fn a_withheld_tenant_gets_nothing_and_its_time_stays_in_the_remainder() {
    let s = split(0.8, None, &[Some(0.3), None]);
    assert_eq!(s, vec![(Owner::Holder(0), 0.3), (Owner::Remainder, 0.5)]);
    // Every tenant withheld: the device value is all remainder, never copied to a pod.
    assert_eq!(
        split(0.8, None, &[None, None]),
        vec![(Owner::Remainder, 0.8)]
    );
}

#[test]
fn no_holder_is_all_remainder() {
    assert_eq!(split(0.4, None, &[]), vec![(Owner::Remainder, 0.4)]);
}

#[test]
fn tenants_above_the_device_are_scaled_to_it_in_proportion() {
    // The sample: three MPS clients' busy times overlap past the device's 0.826.
    let s = split(0.826, None, &[Some(0.30), Some(0.30), Some(0.28)]);
    assert_eq!(s.last(), Some(&(Owner::Remainder, 0.0)));
    assert!((sum(&s) - 0.826).abs() < 1e-12, "{s:?}");
    let (a, c) = (s[0].1, s[2].1);
    assert!((a / c - 0.30 / 0.28).abs() < 1e-12, "proportions kept");
    assert!(s.iter().all(|(_, v)| *v <= 0.826));
}

#[test]
fn a_sum_a_hair_over_the_device_leaves_no_negative_remainder() {
    let s = split(0.63, None, &[Some(0.25), Some(0.22), Some(0.16000000001)]);
    assert_eq!(s.last(), Some(&(Owner::Remainder, 0.0)));
    assert!(sum(&s) <= 0.63 + 1e-15);
    let s = split(0.63, None, &[Some(0.25), Some(0.22), Some(0.16)]);
    assert_eq!(s.last(), Some(&(Owner::Remainder, 0.0)), "{s:?}");
}

#[test]
fn nonsense_figures_are_not_published() {
    let s = split(0.5, None, &[Some(f64::NAN), Some(-0.2)]);
    assert_eq!(s, vec![(Owner::Holder(1), 0.0), (Owner::Remainder, 0.5)]);
}

#[test]
fn free_memory_pairs_with_used_so_every_series_reads_the_device_occupancy() {
    let used = split(30_000.0, None, &[Some(12_000.0), Some(0.0), Some(17_000.0)]);
    let free = pair_free(&used, 50_000.0);
    assert_eq!(free.len(), used.len());
    assert!((sum(&free) - 50_000.0).abs() < 1e-6);
    for ((o, u), (o2, f)) in used.iter().zip(&free) {
        assert_eq!(o, o2);
        if *u > 0.0 {
            assert!((u / (u + f) - 0.375).abs() < 1e-9, "{o:?}: {u} {f}");
        } else {
            assert_eq!(*f, 0.0);
        }
    }
    // An exclusive holder: the device's free memory, with its labels.
    let used = split(1012.0, Some(0), &[None]);
    assert_eq!(
        pair_free(&used, 78_488.0),
        vec![(Owner::Holder(0), 78_488.0)]
    );
    // Nothing used: all remainder, the tenants 0 (present, as their used memory is).
    let used = split(0.0, None, &[Some(0.0)]);
    assert_eq!(
        pair_free(&used, 80_000.0),
        vec![(Owner::Holder(0), 0.0), (Owner::Remainder, 80_000.0)]
    );
}

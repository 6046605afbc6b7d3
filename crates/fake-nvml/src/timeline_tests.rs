use super::*;

#[test]
fn phase_lookup_and_loop() {
    let t = Timeline::new(vec![0, 100, 300], Some(400)).unwrap();
    assert_eq!(t.phase_at(0.0), 0);
    assert_eq!(t.phase_at(99.9), 0);
    assert_eq!(t.phase_at(100.0), 1);
    assert_eq!(t.phase_at(350.0), 2);
    assert_eq!(t.phase_at(410.0), 0);
    assert_eq!(t.phase_at(750.0), 2);
    assert_eq!(t.phase_start(750.0), 700.0);
}

#[test]
fn integral_spans_cycles() {
    let t = Timeline::new(vec![0, 100], Some(200)).unwrap();
    let f = |i: usize| if i == 0 { 1.0 } else { 3.0 };
    // One cycle = 100*1 + 100*3 = 400.
    assert_eq!(t.integrate(0.0, 200.0, &f), 400.0);
    assert_eq!(t.integrate(0.0, 450.0, &f), 800.0 + 50.0);
    assert_eq!(t.integrate(150.0, 250.0, &f), 150.0 + 50.0);
    assert_eq!(t.average(50.0, 150.0, &f), 2.0);
}

#[test]
fn starts_in_window() {
    let t = Timeline::new(vec![0, 100], Some(200)).unwrap();
    assert_eq!(t.starts_in(50.0, 250.0), vec![(100.0, 1), (200.0, 0)]);
    let t = Timeline::new(vec![0, 300], None).unwrap();
    assert_eq!(t.starts_in(-1.0, 1000.0), vec![(0.0, 0), (300.0, 1)]);
}

#[test]
fn rejects_bad_order() {
    assert!(Timeline::new(vec![0, 100, 100], None).is_err());
    assert!(Timeline::new(vec![10], None).is_err());
    assert!(Timeline::new(vec![0, 100], Some(100)).is_err());
}

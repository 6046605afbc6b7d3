use super::*;

#[test]
fn every_reason_is_counted_apart_and_listed_from_zero() {
    let c = RefusedCounts::default();
    assert_eq!(
        c.totals(),
        BTreeMap::from([
            ("malformed", 0),
            ("no-gpu-process", 0),
            ("over-capacity", 0)
        ])
    );
    c.add(Refusal::NoGpuProcess, 3);
    c.add(Refusal::Malformed, 1);
    c.add(Refusal::NoGpuProcess, 2);
    assert_eq!(
        c.totals(),
        BTreeMap::from([
            ("malformed", 1),
            ("no-gpu-process", 5),
            ("over-capacity", 0)
        ])
    );
}

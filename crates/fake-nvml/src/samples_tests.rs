use super::*;

#[test]
fn a_sample_every_200ms_and_the_last_71_kept() {
    let held = held_samples(30_050.0, 1_000_000, |t| (t / 1000.0) as u32);
    assert_eq!(held.len(), 71);
    assert_eq!(held.last(), Some(&(1_000_000 + 30_000_000, 30)));
    assert_eq!(held[0].0, 1_000_000 + 16_000_000);
    assert!(held.windows(2).all(|w| w[1].0 - w[0].0 == 200_000));
}

#[test]
fn none_before_the_first_period() {
    assert!(held_samples(150.0, 0, |_| 1).is_empty());
    assert_eq!(held_samples(450.0, 0, |_| 1).len(), 2);
}

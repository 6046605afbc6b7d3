use super::*;
use crate::model::energy::State;

fn key(pod: &str) -> EnergyKey {
    EnergyKey::new(
        std::sync::Arc::new(crate::model::holding::PodRef {
            namespace: "ml".into(),
            pod: pod.into(),
            container: "main".into(),
            ..Default::default()
        }),
        None,
    )
}

/// A second's estimate: `a` busy with `wa` joules, `b` idle with `wb`, `nobody` withheld.
fn second(wa: f64, wb: f64, nobody: f64) -> Charges {
    let mut c = Charges::default();
    c.split
        .insert(Recipient::Container(key("a"), State::NotIdle), wa);
    c.split
        .insert(Recipient::Container(key("b"), State::Idle), wb);
    c.split
        .insert(Recipient::Nobody(Remainder::Withheld), nobody);
    c.dynamic.insert(key("a"), wa / 2.0);
    c
}

fn both() -> BTreeSet<EnergyKey> {
    [key("a"), key("b")].into_iter().collect()
}

fn of(c: &Credits, pod: &str, s: State) -> f64 {
    c.split
        .get(&Recipient::Container(key(pod), s))
        .copied()
        .unwrap_or(0.0)
}

fn close(a: f64, b: f64) -> bool {
    (a - b).abs() < 1e-6
}

#[test]
fn estimates_wait_for_the_counter_and_are_scaled_to_its_increase() {
    let mut acc = GpuEnergy::default();
    // The first reading marks where the account starts: nothing before it is split.
    let c = step(
        &mut acc,
        &second(300.0, 50.0, 0.0),
        0.0,
        Some(1000.0),
        0.0,
        &both(),
    );
    assert!(c.is_empty());
    // Ten seconds of estimates (3,500 J) while the counter is not read again.
    for t in 1..10 {
        let c = step(
            &mut acc,
            &second(300.0, 50.0, 0.0),
            1.0,
            Some(1000.0),
            t as f64,
            &both(),
        );
        assert!(c.is_empty());
    }
    // The counter says 3,850 J: 10 % more than estimated, for everyone alike.
    let c = step(
        &mut acc,
        &second(300.0, 50.0, 0.0),
        1.0,
        Some(4850.0),
        10.0,
        &both(),
    );
    assert!(close(of(&c, "a", State::NotIdle), 3300.0), "{c:?}");
    assert!(close(of(&c, "b", State::Idle), 550.0));
    assert!(close(c.dynamic[&key("a")], 1650.0));
    assert!(acc.remainder.is_empty(), "{:?}", acc.remainder);
    assert!(acc.pending.is_empty());
    assert_eq!(acc.mark.map(|m| m.joules), Some(4850.0));
}

#[test]
fn what_no_sample_covered_and_what_nobody_was_given_go_to_nobody_and_it_all_adds_up() {
    let mut acc = GpuEnergy::default();
    step(&mut acc, &Charges::default(), 0.0, Some(0.0), 0.0, &both());
    // 6 of 10 seconds covered (the GPU was down for 4).
    for t in 1..=6 {
        step(
            &mut acc,
            &second(100.0, 100.0, 100.0),
            1.0,
            Some(0.0),
            t as f64,
            &both(),
        );
    }
    let c = step(
        &mut acc,
        &Charges::default(),
        0.0,
        Some(2000.0),
        10.0,
        &both(),
    );
    assert!(
        close(acc.remainder[&Remainder::Unsampled], 800.0),
        "{acc:?}"
    );
    assert!(close(acc.remainder[&Remainder::Withheld], 400.0));
    assert!(close(
        of(&c, "a", State::NotIdle) + of(&c, "b", State::Idle),
        800.0
    ));
    let total = c.total() + acc.remainder.values().sum::<f64>();
    assert!(close(total, 2000.0));
}

#[test]
fn a_container_gone_before_the_counter_moves_leaves_its_share_departed() {
    let mut acc = GpuEnergy::default();
    step(&mut acc, &Charges::default(), 0.0, Some(0.0), 0.0, &both());
    step(
        &mut acc,
        &second(100.0, 100.0, 0.0),
        1.0,
        Some(0.0),
        1.0,
        &both(),
    );
    let only_a: BTreeSet<EnergyKey> = [key("a")].into_iter().collect();
    let c = step(
        &mut acc,
        &second(100.0, 0.0, 0.0),
        1.0,
        Some(300.0),
        2.0,
        &only_a,
    );
    assert!(close(of(&c, "a", State::NotIdle), 200.0));
    assert_eq!(of(&c, "b", State::Idle), 0.0);
    assert!(close(acc.remainder[&Remainder::Departed], 100.0));
}

#[test]
fn a_counter_that_goes_back_restarts_the_account_and_credits_nothing() {
    let mut acc = GpuEnergy::default();
    step(
        &mut acc,
        &Charges::default(),
        0.0,
        Some(5000.0),
        0.0,
        &both(),
    );
    step(
        &mut acc,
        &second(100.0, 0.0, 0.0),
        1.0,
        Some(5000.0),
        1.0,
        &both(),
    );
    // A driver reload: the counter restarts near 0.
    let c = step(
        &mut acc,
        &second(100.0, 0.0, 0.0),
        1.0,
        Some(40.0),
        2.0,
        &both(),
    );
    assert!(c.is_empty());
    assert!(acc.remainder.is_empty());
    assert_eq!(acc.mark.map(|m| m.joules), Some(40.0));
    // From there on the account runs again.
    let c = step(
        &mut acc,
        &second(100.0, 0.0, 0.0),
        1.0,
        Some(140.0),
        3.0,
        &both(),
    );
    assert!(close(of(&c, "a", State::NotIdle), 100.0));
}

#[test]
fn an_increase_nothing_estimated_goes_to_nobody() {
    let mut acc = GpuEnergy::default();
    step(&mut acc, &Charges::default(), 0.0, Some(0.0), 0.0, &both());
    // Power was never read: no estimate, nothing covered.
    for t in 1..5 {
        step(
            &mut acc,
            &Charges::default(),
            0.0,
            Some(0.0),
            t as f64,
            &both(),
        );
    }
    let c = step(
        &mut acc,
        &Charges::default(),
        0.0,
        Some(400.0),
        5.0,
        &both(),
    );
    assert!(c.is_empty());
    assert_eq!(acc.remainder[&Remainder::Unsampled], 400.0);
}

#[test]
fn a_missing_counter_reading_keeps_the_estimates_for_the_next_one() {
    let mut acc = GpuEnergy::default();
    step(&mut acc, &Charges::default(), 0.0, Some(0.0), 0.0, &both());
    step(&mut acc, &second(100.0, 0.0, 0.0), 1.0, None, 1.0, &both());
    let c = step(
        &mut acc,
        &second(100.0, 0.0, 0.0),
        1.0,
        Some(210.0),
        2.0,
        &both(),
    );
    assert!(close(of(&c, "a", State::NotIdle), 210.0));
}

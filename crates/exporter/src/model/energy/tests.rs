use std::collections::BTreeSet;

use super::*;

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

#[test]
fn charges_add_scaled_and_total_only_the_split() {
    let mut a = Charges::default();
    a.split
        .insert(Recipient::Container(key("a"), State::NotIdle), 10.0);
    a.dynamic.insert(key("a"), 4.0);
    let mut b = Charges::default();
    b.split.insert(Recipient::Nobody(Remainder::Withheld), 5.0);
    b.split
        .insert(Recipient::Container(key("a"), State::NotIdle), 1.0);
    b.lower.insert(key("a"), 2.0);
    a.add(&b, 2.0);
    assert_eq!(a.total(), 10.0 + 2.0 + 10.0);
    assert_eq!(a.dynamic[&key("a")], 4.0);
    assert_eq!(a.lower[&key("a")], 4.0, "bounds sit beside the sum");
}

#[test]
fn every_reason_and_state_has_its_own_label() {
    let reasons = [
        Remainder::Unallocated,
        Remainder::FloorUnknown,
        Remainder::Withheld,
        Remainder::Disputed,
        Remainder::SoleActivePod,
        Remainder::BoundsOnly,
        Remainder::Unattributed,
        Remainder::Unsampled,
        Remainder::Departed,
    ];
    let labels: BTreeSet<&str> = reasons.iter().map(|r| r.as_label()).collect();
    assert_eq!(labels.len(), reasons.len());
    // The label is the serialised name, so /debug/attribution and the metrics agree.
    for r in reasons {
        assert_eq!(
            serde_json::to_value(r).ok(),
            Some(serde_json::Value::from(r.as_label()))
        );
    }
    for (a, s) in [
        (Activity::Idle, "idle"),
        (Activity::Busy, "not-idle"),
        (Activity::Unknown, "not-idle"),
    ] {
        assert_eq!(State::from(a).as_label(), s);
    }
}

use super::*;

fn labels(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

#[test]
fn time_slicing_with_replicas() {
    let s = NodeSharing::from_labels(&labels(&[
        (SHARING_STRATEGY_LABEL, "time-slicing"),
        (REPLICAS_LABEL, "4"),
        (PRODUCT_LABEL, "NVIDIA-A100-SXM4-80GB-SHARED"),
        ("nvidia.com/mig.capable", "true"),
    ]));
    assert_eq!(s.strategy, Some(SharingStrategy::TimeSlicing));
    assert_eq!(s.replicas, Some(4));
    assert_eq!(s.product.as_deref(), Some("NVIDIA-A100-SXM4-80GB-SHARED"));
    assert_eq!(s.mig_strategy, None);
    assert!(s.per_profile.is_empty());
}

#[test]
fn mps_and_unknown_values() {
    let s = NodeSharing::from_labels(&labels(&[
        (SHARING_STRATEGY_LABEL, "MPS"),
        (REPLICAS_LABEL, "four"),
    ]));
    assert_eq!(s.strategy, Some(SharingStrategy::Mps));
    assert_eq!(s.replicas, None);
    let s = NodeSharing::from_labels(&labels(&[(SHARING_STRATEGY_LABEL, "fractional")]));
    assert_eq!(
        s.strategy,
        Some(SharingStrategy::Other("fractional".into()))
    );
    assert_eq!(
        s.strategy.as_ref().map(SharingStrategy::as_str),
        Some("fractional")
    );
    assert_eq!(
        NodeSharing::from_labels(&BTreeMap::new()),
        NodeSharing::default()
    );
}

#[test]
fn mixed_mig_per_profile() {
    let s = NodeSharing::from_labels(&labels(&[
        (MIG_STRATEGY_LABEL, "mixed"),
        ("nvidia.com/mig-1g.10gb.count", "4"),
        ("nvidia.com/mig-1g.10gb.sharing-strategy", "time-slicing"),
        ("nvidia.com/mig-1g.10gb.replicas", "2"),
        ("nvidia.com/mig-3g.40gb.sharing-strategy", "none"),
        ("nvidia.com/mig-1g.10gb.me.sharing-strategy", "mps"),
        ("nvidia.com/mig-1g.10gb.me.replicas", "3"),
        ("nvidia.com/mig.config", "all-balanced"),
    ]));
    assert_eq!(s.mig_strategy.as_deref(), Some("mixed"));
    assert_eq!(s.per_profile.len(), 3);
    assert_eq!(
        s.per_profile["1g.10gb"],
        (Some(SharingStrategy::TimeSlicing), Some(2))
    );
    assert_eq!(
        s.per_profile["3g.40gb"],
        (Some(SharingStrategy::None), None)
    );
    assert_eq!(
        s.per_profile["1g.10gb.me"],
        (Some(SharingStrategy::Mps), Some(3))
    );
    assert_eq!(s.strategy, None);
}

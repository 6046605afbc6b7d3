use super::super::recommend::{advise_all, Policy, Profile, WorkloadKey};
use super::*;

fn sample() -> (Vec<Advice>, Meta) {
    let idle = Profile {
        key: WorkloadKey {
            namespace: "research".into(),
            kind: "StatefulSet".into(),
            name: "<notebook>".into(),
            sharing_mode: "exclusive".into(),
            ..WorkloadKey::default()
        },
        model: Some("NVIDIA H100 80GB HBM3".into()),
        gpus_held: 1.0,
        replicas: 1.0,
        idle_gpus: 1.0,
        mem_peak_bytes: Some(30.0 * GIB),
        sm_p50: Some(0.0),
        sm_p95: Some(0.0),
        compute_coverage: 1.0,
        billed_gpus: 0.0,
        accountable_gpus: 0.0,
        history_s: 604_800.0,
        ..Profile::default()
    };
    let advice = advise_all(
        vec![idle],
        &Policy {
            window_s: 604_800.0,
            price_per_gpu_hour: Some(2.5),
        },
    );
    let meta = Meta {
        prometheus: "http://p:9090".into(),
        window: "7d".into(),
        generated_at: "2026-01-01T00:00:00Z".into(),
        price_per_gpu_hour: Some(2.5),
        price_source: Some("--price-per-gpu-hour".into()),
    };
    (advice, meta)
}

#[test]
fn the_table_says_how_much_of_a_workloads_gpu_time_a_bill_could_attribute() {
    let (mut a, m) = sample();
    assert!(
        !table(&a, &m).contains("Billed"),
        "nothing busy, no bill line"
    );
    a[0].profile.billed_gpus = 0.3;
    a[0].profile.accountable_gpus = 0.4;
    let t = table(&a, &m);
    assert!(
        t.contains("Billed: 0.30 GPUs (75 % of its GPU time attributable)"),
        "{t}"
    );
    assert!(json(&a, &m).contains("accountable_gpus"));
}

#[test]
fn every_format_carries_the_recommendation_and_the_money() {
    let (a, m) = sample();
    for text in [table(&a, &m), markdown(&a, &m), html(&a, &m), json(&a, &m)] {
        assert!(text.contains("release"), "{text}");
        assert!(text.contains("1825"), "{text}"); // 1 GPU * 2.50 * 730 h
    }
}

#[test]
fn html_is_escaped_and_self_contained() {
    let (a, m) = sample();
    let h = html(&a, &m);
    assert!(h.contains("&lt;notebook&gt;") && !h.contains("<notebook>"));
    for external in ["<script", "<link", "src=", "url(", "@import"] {
        assert!(!h.contains(external), "{external}");
    }
}

#[test]
fn json_round_trips() {
    let (a, m) = sample();
    let v: serde_json::Value = serde_json::from_str(&json(&a, &m)).unwrap();
    assert_eq!(v["advice"][0]["action"], "release");
    assert_eq!(v["total_gpus_saved"], 1.0);
}

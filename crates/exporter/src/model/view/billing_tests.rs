use super::*;
use crate::model::figures::{DisputeReason, WideFigure};
use crate::model::holding::PodRef;
use crate::model::testkit;

fn row(ns: &str, pod: &str, container: &str, sm: Option<f64>) -> ContainerUse {
    ContainerUse {
        sm_utilization: sm,
        ..testkit::container_use(PodRef {
            namespace: ns.into(),
            pod: pod.into(),
            container: container.into(),
            workload_kind: "Deployment".into(),
            workload: pod.into(),
            labels: Vec::new(),
        })
    }
}

fn split(method: SplitMethod, device: f64) -> DeviceSplit {
    DeviceSplit {
        method,
        device_activity: Some(device),
        candidates: Vec::new(),
        quiet: Vec::new(),
        probe_idle: Vec::new(),
        probe_scale: None,
        why: String::new(),
        from_timelines: false,
        wide: None,
        disputed: Vec::new(),
        profiler: Vec::new(),
        no_cupti: Vec::new(),
        probe_stages: Default::default(),
        outlasting: Default::default(),
        solo_excess: None,
        idle_since: None,
        idle_unsettled: false,
        bounds_only: None,
        lone_stretch: None,
        device_window: None,
        figure_window: None,
        recent_activity: Vec::new(),
        shares: HashMap::new(),
    }
}

#[test]
fn a_pod_figure_accumulates_by_rule_and_the_unknown_rest_counts_against_coverage() {
    // Sample 1: two containers of one pod shared the device: the pod's figure, none of theirs.
    let mut s = split(SplitMethod::SoleActivePod, 0.6);
    s.wide = Some(WideFigure {
        namespace: "ml".into(),
        pod: "ray".into(),
        container: None,
        share: 0.6,
    });
    let rows = [row("ml", "ray", "a", None), row("ml", "ray", "b", None)];
    let (pods, acc) = account(&s, &rows, None, Some(0.6), 10.0, &Previous::default());
    assert_eq!(pods.len(), 1);
    assert_eq!(pods[0].share, Some(0.6));
    assert_eq!(pods[0].method, SplitMethod::SoleActivePod);
    assert!((pods[0].attributed_seconds[&SplitMethod::SoleActivePod] - 6.0).abs() < 1e-9);
    assert!((acc.busy_seconds - 6.0).abs() < 1e-9);

    // Sample 2: another pod joins and the split is disputed: nobody is charged, both pods'
    // lines carry the busy time as unattributed, the dispute is counted.
    let mut d = split(SplitMethod::Disputed, 0.9);
    d.disputed = vec![DisputeReason::NvmlBooked];
    let rows2 = [row("ml", "ray", "a", None), row("web", "api", "c", None)];
    let prev = Previous::of(&pods, std::slice::from_ref(&acc), None);
    let (pods2, acc2) = account(&d, &rows2, None, Some(0.9), 10.0, &prev);
    let ray = pods2.iter().find(|p| p.pod == "ray").unwrap();
    assert!((ray.attributed_seconds[&SplitMethod::SoleActivePod] - 6.0).abs() < 1e-9);
    assert!((ray.unattributed_seconds - 9.0).abs() < 1e-9);
    assert_eq!(acc2.disputed_samples[&DisputeReason::NvmlBooked], 1);
    assert!((acc2.busy_seconds - 15.0).abs() < 1e-9);
    assert_eq!(
        acc2.attributed_seconds.values().sum::<f64>(),
        6.0,
        "nothing attributed while disputed"
    );
}

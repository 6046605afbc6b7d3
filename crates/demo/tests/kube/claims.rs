use serde_json::{json, Value};

use crate::{cfg, cluster, pod, slice, start, wait_for, NODE};
use tessera_demo::fakes::apiserver::FakeCluster;
use tessera_exporter::source::kube::KubeConfig;

fn claim(ns: &str, name: &str, percent: Value) -> Value {
    json!({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
            "metadata": {"namespace": ns, "name": name, "uid": format!("uid-{name}")},
            "spec": {"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": "gpu.nvidia.com"}}]}},
            "status": {"allocation": {"devices": {
                "results": [{"request": "gpu", "driver": "gpu.nvidia.com", "pool": NODE, "device": "gpu-0"}],
                "config": [{"source": "FromClaim", "requests": ["gpu"], "opaque": {"driver": "gpu.nvidia.com",
                    "parameters": {"apiVersion": "resource.nvidia.com/v1beta1", "kind": "GpuConfig",
                        "sharing": {"strategy": "MPS", "mpsConfig": {"defaultActiveThreadPercentage": percent}}}}}]}}}})
}

fn claiming(name: &str, claim: &str, template: bool) -> k8s_openapi::api::core::v1::Pod {
    let extra = if template {
        json!({"spec": {"resourceClaims": [{"name": "gpu", "resourceClaimTemplateName": "t"}]},
                "status": {"resourceClaimStatuses": [{"name": "gpu", "resourceClaimName": claim}]}})
    } else {
        json!({"spec": {"resourceClaims": [{"name": "gpu", "resourceClaimName": claim}]}})
    };
    pod("ml", name, &format!("uid-{name}"), NODE, extra)
}

async fn check(v1: bool) {
    let c = FakeCluster {
        slices: vec![slice(
            "s",
            NODE,
            json!([{"name": "gpu-0", "attributes": {"uuid": {"string": "GPU-aaaa"}, "type": {"string": "gpu"}}}]),
        )],
        claims: vec![
            claim("ml", "a-gpu-x1", json!(25)),
            claim("ml", "shared", json!(50)),
            // Another namespace's claim of the same name is not the pod's.
            claim("other", "shared", json!(75)),
        ],
        serve_v1: v1,
        ..cluster(vec![claiming("a", "a-gpu-x1", true)])
    };
    let mut r = start(c, KubeConfig { dra: true, ..cfg() }).await;
    let ratio = |v: &tessera_exporter::model::cluster::ClusterView, claim: &str| {
        v.dra_config("ml", claim, "gpu.nvidia.com", NODE, "gpu-0")
            .and_then(|d| d.thread_ratio)
    };
    let s = wait_for(&mut r.rx, "template claim", |s| {
        s.healthy
            && s.data
                .as_deref()
                .is_some_and(|v| ratio(v, "a-gpu-x1").is_some())
    })
    .await;
    assert_eq!(
        s.data.as_deref().and_then(|v| ratio(v, "a-gpu-x1")),
        Some(0.25)
    );
    // A pod naming a claim directly; its claim is read without waiting for the resync.
    r.server.set_pods(vec![
        claiming("a", "a-gpu-x1", true),
        claiming("b", "shared", false),
    ]);
    let s = wait_for(&mut r.rx, "direct claim", |s| {
        s.data
            .as_deref()
            .is_some_and(|v| ratio(v, "shared").is_some())
    })
    .await;
    let v = s.data.unwrap_or_default();
    assert_eq!(ratio(&v, "shared"), Some(0.5));
    assert_eq!(v.dra_claims.len(), 2);
    let log = r.server.request_log();
    let gets: Vec<&String> = log
        .iter()
        .filter(|l| l.contains("/resourceclaims/"))
        .collect();
    assert!(
        gets.iter().all(|l| l.contains("/namespaces/ml/")),
        "{gets:?}"
    );
    assert_eq!(
        gets.iter()
            .any(|l| l.starts_with("/apis/resource.k8s.io/v1beta1/")),
        !v1
    );
    // A deleted claim drops out; its pod's device then says nothing.
    r.server.set_claims(vec![claim("ml", "shared", json!(50))]);
    wait_for(&mut r.rx, "claim gone", |s| {
        s.healthy && s.data.as_deref().is_some_and(|v| v.dra_claims.len() == 1)
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn claims_v1() {
    check(true).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn claims_fall_back_to_v1beta1() {
    check(false).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failing_claim_read_is_visible_and_not_fatal() {
    let c = FakeCluster {
        claims: vec![claim("ml", "a-gpu-x1", json!(25))],
        ..cluster(vec![claiming("a", "a-gpu-x1", true)])
    };
    let mut r = start(c, KubeConfig { dra: true, ..cfg() }).await;
    wait_for(&mut r.rx, "first read", |s| {
        s.healthy && s.data.as_deref().is_some_and(|v| v.dra_claims.len() == 1)
    })
    .await;
    r.server.fail_next(50, 500);
    let s = wait_for(&mut r.rx, "failing", |s| !s.healthy).await;
    assert!(
        s.data.as_deref().is_some_and(|v| v.dra_claims.len() == 1),
        "last data kept"
    );
    r.server.fail_next(0, 500);
    let s = wait_for(&mut r.rx, "recovered", |s| s.healthy).await;
    assert!(s.data.is_some());
}

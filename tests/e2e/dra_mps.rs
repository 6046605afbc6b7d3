//! DRA sharing config end to end: the real binary reads a ResourceClaim's NVIDIA `GpuConfig`
//! from the fake API server and turns it into the GPU's sharing mode and per-container limits.

use crate::support::Exporter;
use k8s_openapi::api::core::v1::{Pod, PodResourceClaim, PodResourceClaimStatus};
use serde_json::{json, Value};
use tessera_demo::cluster::{self, PodPlan};
use tessera_demo::fakes::apiserver::{FakeApiServer, FakeCluster};
use tessera_demo::fakes::kubelet::FakeKubelet;
use tessera_exporter::source::podresources::DynamicDevice;

const NODE: &str = "test-node";
const GPU0: &str = "GPU-d0000000-0000-0000-0000-000000000000";
const GPU1: &str = "GPU-d1111111-0000-0000-0000-000000000000";
const GIB: u64 = 1 << 30;

/// (pod, pid, claim, device, whether the pod names the claim directly or through a template)
const PODS: [(&str, u32, &str, &str, bool); 3] = [
    ("mps-a-0", 8001, "mps-shared", "gpu-0", true),
    ("mps-b-0", 8002, "mps-shared", "gpu-0", true),
    ("ts-0", 8101, "ts-0-gpu-7x2kq", "gpu-1", false),
];

fn plans() -> Vec<PodPlan> {
    PODS.iter()
        .map(|(name, pid, ..)| PodPlan::single("ml", name, "", &[], &[*pid]))
        .collect()
}

fn with_claim(mut pod: Pod, claim: &str, direct: bool) -> Pod {
    if let Some(spec) = pod.spec.as_mut() {
        spec.resource_claims = Some(vec![PodResourceClaim {
            name: "gpu".into(),
            resource_claim_name: direct.then(|| claim.to_owned()),
            resource_claim_template_name: (!direct).then(|| "one-gpu".to_owned()),
        }]);
    }
    if let (Some(status), false) = (pod.status.as_mut(), direct) {
        status.resource_claim_statuses = Some(vec![PodResourceClaimStatus {
            name: "gpu".into(),
            resource_claim_name: Some(claim.to_owned()),
        }]);
    }
    pod
}

fn gpu_config(sharing: Value) -> Value {
    json!({"apiVersion": "resource.nvidia.com/v1beta1", "kind": "GpuConfig", "sharing": sharing})
}

/// A claim as the API server shows it once allocated and reserved.
fn claim(name: &str, device: &str, configs: Value, pods: &[&str]) -> Value {
    json!({
        "apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
        "metadata": {"namespace": "ml", "name": name, "uid": format!("uid-{name}"), "resourceVersion": "7"},
        "spec": {"devices": {"requests": [{"name": "gpu",
            "exactly": {"deviceClassName": "gpu.nvidia.com", "allocationMode": "ExactCount", "count": 1}}]}},
        "status": {
            "allocation": {"devices": {
                "results": [{"request": "gpu", "driver": "gpu.nvidia.com", "pool": NODE, "device": device}],
                "config": configs}},
            "reservedFor": pods.iter().map(|p| json!({"resource": "pods", "name": p, "uid": format!("uid-{p}")})).collect::<Vec<_>>()
        }
    })
}

fn claims() -> Vec<Value> {
    let class_default = json!({"source": "FromClass", "requests": [], "opaque": {"driver": "gpu.nvidia.com",
        "parameters": gpu_config(json!({"strategy": "TimeSlicing", "timeSlicingConfig": {"interval": "Default"}}))}});
    let mps = json!({"source": "FromClaim", "requests": ["gpu"], "opaque": {"driver": "gpu.nvidia.com",
        "parameters": gpu_config(json!({"strategy": "MPS", "mpsConfig": {
            "defaultActiveThreadPercentage": 40,
            "defaultPinnedDeviceMemoryLimit": "10Gi",
            "defaultPerDevicePinnedMemoryLimit": {GPU0: "20Gi"}}}))}});
    let ts = json!({"source": "FromClaim", "requests": ["gpu"], "opaque": {"driver": "gpu.nvidia.com",
        "parameters": gpu_config(json!({"strategy": "TimeSlicing", "timeSlicingConfig": {"interval": "Long"}}))}});
    // Another driver's config in the same list is skipped, as the NVIDIA driver skips it.
    let foreign = json!({"source": "FromClaim", "requests": [], "opaque": {"driver": "nic.example.com",
        "parameters": {"mtu": 9000}}});
    vec![
        claim(
            "mps-shared",
            "gpu-0",
            json!([class_default.clone(), mps, foreign]),
            &["mps-a-0", "mps-b-0"],
        ),
        claim(
            "ts-0-gpu-7x2kq",
            "gpu-1",
            json!([class_default, ts]),
            &["ts-0"],
        ),
    ]
}

fn line<'a>(m: &'a str, family: &str, needle: &str) -> Option<&'a str> {
    m.lines()
        .find(|l| l.starts_with(family) && l.contains(needle))
}

fn val(m: &str, family: &str, needle: &str) -> Option<f64> {
    line(m, family, needle)?.rsplit_once(' ')?.1.parse().ok()
}

fn mode<'a>(m: &'a str, gpu: &str) -> Option<&'a str> {
    let l = line(m, "gpu_info{", &format!("gpu=\"{gpu}\""))?;
    l.split("sharing_mode=\"").nth(1)?.split('"').next()
}

#[test]
fn a_claims_mps_config_sets_mode_and_limits() {
    let rt = crate::support::fake_cluster_runtime();
    let dir = tempfile::tempdir().unwrap();
    let plans = plans();
    let pods = plans
        .iter()
        .zip(PODS)
        .map(|(p, (_, _, claim, _, direct))| with_claim(p.to_pod(NODE), claim, direct))
        .collect();
    let slice = serde_json::from_value(json!({
        "apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice", "metadata": {"name": "test-node-gpus"},
        "spec": {"driver": "gpu.nvidia.com", "nodeName": NODE,
            "pool": {"name": NODE, "generation": 1, "resourceSliceCount": 1},
            "devices": [
                {"name": "gpu-0", "attributes": {"uuid": {"string": GPU0}, "type": {"string": "gpu"}}},
                {"name": "gpu-1", "attributes": {"uuid": {"string": GPU1}, "type": {"string": "gpu"}}}]}
    }))
    .unwrap();
    let api = rt
        .block_on(FakeApiServer::start(FakeCluster {
            pods,
            nodes: vec![cluster::node(NODE, Default::default())],
            slices: vec![slice],
            claims: claims(),
            ..Default::default()
        }))
        .unwrap();
    let mut state = cluster::kubelet_state(&plans, Vec::new());
    for (p, (_, _, claim, device, _)) in state.pods.iter_mut().zip(PODS) {
        p.containers[0].dynamic.push(DynamicDevice {
            claim_name: claim.into(),
            claim_namespace: "ml".into(),
            driver: "gpu.nvidia.com".into(),
            pool: NODE.into(),
            device: device.into(),
            share_id: None,
        });
    }
    let socket = dir.path().join("kubelet.sock");
    let _kubelet: FakeKubelet = rt.block_on(FakeKubelet::start(&socket, state)).unwrap();
    let e = Exporter::builder(crate::support::workspace().join("tests/scenarios/dra-mps.yaml"))
        .in_fake_cluster(dir.path(), &api.url(), plans.clone(), &socket)
        .arg("--kube.dra=true")
        .arg("--web.enable-debug")
        .start();
    e.wait_until("the claim's MPS limits", |e| {
        let m = e.metrics();
        line(&m, "gpu_container_compute_limit_ratio{", "mps-b-0").is_some()
            && mode(&m, "1") == Some("time-slicing")
    });
    let m = e.settle();

    // Nothing in NVML says MPS on GPU 0: the claim's config does.
    assert_eq!(mode(&m, "0"), Some("mps"), "{m}");
    assert_eq!(mode(&m, "1"), Some("time-slicing"), "{m}");
    for pod in ["mps-a-0", "mps-b-0"] {
        assert!(
            line(&m, "gpu_container_allocation{", pod)
                .is_some_and(|l| l.contains(r#"claim="ml/mps-shared""#)),
            "{m}"
        );
        // The per-device limit for GPU 0's UUID beats the 10Gi default.
        assert_eq!(
            val(&m, "gpu_container_memory_limit_bytes{", pod),
            Some((20 * GIB) as f64),
            "{m}"
        );
        assert_eq!(
            val(&m, "gpu_container_compute_limit_ratio{", pod),
            Some(0.4)
        );
        assert!(line(&m, "gpu_container_memory_used_bytes{", pod)
            .is_some_and(|l| l.contains(r#"sharing_mode="mps""#)));
    }
    // Time-slicing sets no limits.
    assert_eq!(line(&m, "gpu_container_memory_limit_bytes{", "ts-0"), None);
    assert_eq!(line(&m, "gpu_container_compute_limit_ratio{", "ts-0"), None);
    assert_eq!(val(&m, "gpu_sharers{", r#"gpu="0""#), Some(2.0));

    let (status, debug) = e.get("/debug/attribution").unwrap();
    assert_eq!(status, 200);
    for needle in [
        r#""config":"DRA GpuConfig MPS""#,
        r#""claim":"ml/mps-shared""#,
        r#""source":"dra-mps""#,
        r#""config":"DRA GpuConfig TimeSlicing (Long)""#,
        r#""declared":"mps""#,
    ] {
        assert!(debug.contains(needle), "{needle} missing from {debug}");
    }
    let reads = api.request_log();
    assert!(
        reads
            .iter()
            .any(|l| l == "/apis/resource.k8s.io/v1/namespaces/ml/resourceclaims/mps-shared"),
        "{reads:?}"
    );
    e.stop();
}

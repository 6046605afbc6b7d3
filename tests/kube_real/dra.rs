//! DRA against the real server: DeviceClasses, a ResourceSlice and ResourceClaims carrying
//! NVIDIA's `GpuConfig` (MPS, TimeSlicing) and `MigDeviceConfig` (MPS), created as objects the
//! server validates, allocated through the status subresource as the scheduler would.

use std::time::Duration;

use serde_json::{json, Value};
use tessera_demo::fakes::kubelet::{FakeKubelet, FakeKubeletState};
use tessera_exporter::source::podresources::DynamicDevice;

use super::{line, pod, real, run_pod, wait_metrics, write_cgroup, Real, NODE};
use crate::{exporter_with, fake_pod_dyn};

const NS: &str = "dra";
const DRIVER: &str = "gpu.nvidia.com";
const G0: &str = "GPU-da000000-0000-0000-0000-000000000000";
const G1: &str = "GPU-da111111-0000-0000-0000-000000000000";
const G2: &str = "GPU-da222222-0000-0000-0000-000000000000";
const MIG: &str = "MIG-da222222-0000-0000-0000-00000000000a";
const MIG_DEVICE: &str = "gpu-2-mig-1g10gb-19-4";
const GIB: u64 = 1 << 30;

/// (pod, pid, claim, request, device)
const PODS: [(&str, u32, &str, &str, &str); 4] = [
    ("mps-a-0", 8001, "mps-shared", "gpu", "gpu-0"),
    ("mps-b-0", 8002, "mps-shared", "gpu", "gpu-0"),
    ("ts-0", 8101, "ts-one", "gpu", "gpu-1"),
    ("mig-0", 8201, "mig-mps", "mig", MIG_DEVICE),
];

const SCENARIO: &str = "\
gpus:
  - { sku: h100-80gb-hbm3, uuid: GPU-da000000-0000-0000-0000-000000000000 }
  - { sku: h100-80gb-hbm3, uuid: GPU-da111111-0000-0000-0000-000000000000 }
  - sku: h100-80gb-hbm3
    uuid: GPU-da222222-0000-0000-0000-000000000000
    mig:
      instances:
        - { profile: 1g.10gb, placement: 4, uuid: MIG-da222222-0000-0000-0000-00000000000a }
phases:
  - at_ms: 0
    processes:
      - { pid: 8001, gpu: 0, comm: python3, memory_mib: 6000, sm_util: 30, mem_util: 3 }
      - { pid: 8002, gpu: 0, comm: python3, memory_mib: 3000, sm_util: 15, mem_util: 2 }
      - { pid: 8101, gpu: 1, comm: python3, memory_mib: 2000, sm_util: 18, mem_util: 1 }
      - { pid: 8201, gpu: 2, mig_instance: 0, comm: python3, memory_mib: 2000, sm_util: 10, mem_util: 1 }
";

fn nvidia(kind: &str, sharing: Value) -> Value {
    json!({"apiVersion": "resource.nvidia.com/v1beta1", "kind": kind, "sharing": sharing})
}

fn device_classes(real: &Real) {
    // The driver's classes: CEL selectors the server compiles, and a class-wide default
    // config the claims' own configs override.
    for (name, ty) in [("gpu.nvidia.com", "gpu"), ("mig.nvidia.com", "mig")] {
        real.ensure(json!({"apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass",
            "metadata": {"name": name},
            "spec": {
                "selectors": [{"cel": {"expression": format!(
                    "device.driver == '{DRIVER}' && device.attributes['{DRIVER}'].type == '{ty}'")}}],
                "config": [{"opaque": {"driver": DRIVER, "parameters": nvidia(
                    if ty == "gpu" { "GpuConfig" } else { "MigDeviceConfig" },
                    json!({"strategy": "TimeSlicing"}))}}]}}));
    }
}

fn slice() -> Value {
    let gpu = |name: &str, uuid: &str| {
        json!({"name": name, "attributes": {"type": {"string": "gpu"}, "uuid": {"string": uuid},
            "productName": {"string": "NVIDIA H100 80GB HBM3"}},
            "capacity": {"memory": {"value": "80Gi"}}})
    };
    json!({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice",
        "metadata": {"name": format!("{NODE}-{DRIVER}")},
        "spec": {"driver": DRIVER, "nodeName": NODE,
            "pool": {"name": NODE, "generation": 1, "resourceSliceCount": 1},
            "devices": [gpu("gpu-0", G0), gpu("gpu-1", G1),
                {"name": MIG_DEVICE, "attributes": {"type": {"string": "mig"},
                    "uuid": {"string": MIG}, "parentUUID": {"string": G2},
                    "profile": {"string": "1g.10gb"}},
                 "capacity": {"memory": {"value": "10Gi"}}}]}})
}

/// The claim's own config for its request.
fn claim_config(claim: &str) -> Value {
    match claim {
        "mps-shared" => nvidia(
            "GpuConfig",
            json!({"strategy": "MPS", "mpsConfig": {
                "defaultActiveThreadPercentage": 40,
                "defaultPinnedDeviceMemoryLimit": "10Gi",
                "defaultPerDevicePinnedMemoryLimit": {G0: "20Gi"}}}),
        ),
        "ts-one" => nvidia(
            "GpuConfig",
            json!({"strategy": "TimeSlicing", "timeSlicingConfig": {"interval": "Long"}}),
        ),
        _ => nvidia("MigDeviceConfig", json!({"strategy": "MPS"})),
    }
}

fn claim(name: &str, request: &str) -> Value {
    let class = if request == "mig" {
        "mig.nvidia.com"
    } else {
        "gpu.nvidia.com"
    };
    json!({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
        "metadata": {"namespace": NS, "name": name},
        "spec": {"devices": {
            "requests": [{"name": request, "exactly": {"deviceClassName": class,
                "allocationMode": "ExactCount", "count": 1}}],
            "config": [{"requests": [request],
                "opaque": {"driver": DRIVER, "parameters": claim_config(name)}}]}}})
}

/// What the scheduler writes on allocation: the device, the class's config then the claim's,
/// and the pods it is reserved for.
fn allocation(claim: &str, request: &str, device: &str, pods: &[&Value]) -> Value {
    let class_ty = if request == "mig" {
        "MigDeviceConfig"
    } else {
        "GpuConfig"
    };
    json!({
        "allocation": {
            "devices": {
                "results": [{"request": request, "driver": DRIVER, "pool": NODE, "device": device}],
                "config": [
                    {"source": "FromClass", "requests": [], "opaque": {"driver": DRIVER,
                        "parameters": nvidia(class_ty, json!({"strategy": "TimeSlicing"}))}},
                    {"source": "FromClaim", "requests": [request], "opaque": {"driver": DRIVER,
                        "parameters": claim_config(claim)}}]},
            "nodeSelector": {"nodeSelectorTerms": [{"matchFields": [
                {"key": "metadata.name", "operator": "In", "values": [NODE]}]}]}},
        "reservedFor": pods.iter().map(|p| json!({"resource": "pods",
            "name": p["metadata"]["name"], "uid": p["metadata"]["uid"]})).collect::<Vec<_>>()
    })
}

fn mode<'a>(m: &'a str, gpu: &str) -> Option<&'a str> {
    let l = line(m, "gpu_info{", &[&format!("gpu=\"{gpu}\"")])?;
    l.split("sharing_mode=\"").nth(1)?.split('"').next()
}

fn val(m: &str, family: &str, pod: &str) -> Option<f64> {
    line(m, family, &[&format!("pod=\"{pod}\"")])?
        .rsplit_once(' ')?
        .1
        .parse()
        .ok()
}

#[test]
#[ignore = "needs a real kube-apiserver: scripts/test-kube-real.sh"]
fn dra_claims_with_nvidia_configs_resolve_as_with_the_fake() {
    let real = real();
    real.namespace(NS);
    real.node(NODE, json!({}));
    device_classes(&real);
    real.ensure(slice());
    let mut claims = Vec::new();
    for name in ["mps-shared", "ts-one", "mig-mps"] {
        let request = if name == "mig-mps" { "mig" } else { "gpu" };
        claims.push((name, request, real.create(claim(name, request))));
    }
    let mut pods = Vec::new();
    for (name, _, claim, _, _) in PODS {
        let mut p = pod(NS, name, NODE, json!({"team": "dra"}), None);
        p["spec"]["resourceClaims"] = json!([{"name": "gpu", "resourceClaimName": claim}]);
        let created = real.create(p);
        run_pod(&real, &created);
        pods.push(created);
    }
    for (name, request, created) in &claims {
        let holders: Vec<&Value> = PODS
            .iter()
            .zip(&pods)
            .filter(|((_, _, c, _, _), _)| c == name)
            .map(|(_, p)| p)
            .collect();
        let device = PODS.iter().find(|p| p.2 == *name).map(|p| p.4).unwrap();
        real.patch_status(created, allocation(name, request, device, &holders));
    }

    let dir = tempfile::tempdir().unwrap();
    let scenario = dir.path().join("scenario.yaml");
    std::fs::write(&scenario, SCENARIO).unwrap();
    let socket = dir.path().join("kubelet.sock");
    let state = FakeKubeletState {
        pods: PODS
            .iter()
            .map(|(name, _, claim, _, device)| {
                let dynamic = vec![DynamicDevice {
                    claim_name: (*claim).into(),
                    claim_namespace: NS.into(),
                    driver: DRIVER.into(),
                    pool: NODE.into(),
                    device: (*device).into(),
                    share_id: None,
                }];
                fake_pod_dyn(NS, name, Vec::new(), dynamic)
            })
            .collect(),
        ..Default::default()
    };
    let kubelet = real
        .rt
        .block_on(FakeKubelet::start(&socket, state))
        .unwrap();
    let cgroups: Vec<(u32, Value)> = PODS
        .iter()
        .zip(&pods)
        .map(|(p, created)| (p.1, created.clone()))
        .collect();
    let e = exporter_with(
        &real,
        &scenario,
        &socket,
        &["--kube.dra=true", "--web.enable-debug"],
        move |procfs| {
            for (pid, created) in &cgroups {
                write_cgroup(procfs, *pid, created);
            }
        },
    );
    wait_metrics(&e, "the claims' configs", Duration::from_secs(30), |m| {
        line(m, "gpu_container_compute_limit_ratio{", &["mps-b-0"]).is_some()
            && mode(m, "1") == Some("time-slicing")
            && line(m, "gpu_container_memory_used_bytes{", &["mig-0"]).is_some()
    });
    let m = e.settle();
    // Nothing in NVML says MPS on GPU 0: the claim's config on the server does.
    assert_eq!(mode(&m, "0"), Some("mps"), "{m}");
    assert_eq!(mode(&m, "1"), Some("time-slicing"), "{m}");
    for p in ["mps-a-0", "mps-b-0"] {
        assert!(
            line(
                &m,
                "gpu_container_allocation{",
                &[p, r#"claim="dra/mps-shared""#]
            )
            .is_some(),
            "{m}"
        );
        // The per-device limit for GPU 0's UUID beats the 10Gi default.
        assert_eq!(
            val(&m, "gpu_container_memory_limit_bytes{", p),
            Some((20 * GIB) as f64),
            "{m}"
        );
        assert_eq!(val(&m, "gpu_container_compute_limit_ratio{", p), Some(0.4));
    }
    assert_eq!(val(&m, "gpu_container_memory_limit_bytes{", "ts-0"), None);
    assert!(
        line(&m, "gpu_container_memory_used_bytes{", &["mig-0", MIG]).is_some(),
        "the MIG claim's device resolved to its instance's UUID through the slice\n{m}"
    );
    let (status, debug) = e.get("/debug/attribution").unwrap();
    assert_eq!(status, 200);
    for needle in [
        r#""config":"DRA GpuConfig MPS""#,
        r#""claim":"dra/mps-shared""#,
        r#""config":"DRA GpuConfig TimeSlicing (Long)""#,
        r#""config":"DRA MigDeviceConfig MPS""#,
    ] {
        assert!(debug.contains(needle), "{needle} missing from {debug}");
    }
    let log = e.stop();
    real.rt.block_on(kubelet.stop());
    // While it served: a watch cut as the process stops is not a source failing.
    let serving = log.split("shutting down").next().unwrap_or(&log);
    assert!(!serving.contains("failing"), "a kube part failed:\n{log}");
}

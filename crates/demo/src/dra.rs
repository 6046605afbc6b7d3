//! The demo's GPU 8: MPS set up by the NVIDIA DRA driver. One ResourceClaim whose opaque
//! `GpuConfig` says MPS is shared by two pods; the API server serves the claim and the node's
//! ResourceSlice, the kubelet the pods' dynamic devices. Only the claim says MPS and sets the
//! limits (no device-plugin resource or node label does), which is what this GPU demonstrates.

use std::collections::BTreeMap;

use k8s_openapi::api::resource::v1::{
    Device, DeviceAttribute, ResourcePool, ResourceSlice, ResourceSliceSpec,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use serde_json::{json, Value};

use super::cluster::PodPlan;
use super::plan;
use tessera_exporter::model::allocations::DynamicDevice;
use tessera_exporter::model::GpuSample;

/// The GPU of the demo scenario the claim allocates.
pub const GPU: usize = 8;
const DRIVER: &str = "gpu.nvidia.com";
/// The NVIDIA driver names full GPUs `gpu-<minor>` in its slices.
const DEVICE: &str = "gpu-8";
const NAMESPACE: &str = "inference";
const CLAIM: &str = "summarizer-mps";
/// The pods' own name for the claim, in `spec.resourceClaims`.
const POD_CLAIM: &str = "shared-gpu";
const SERVER_PID: u32 = 48090;
const TENANTS: [(&str, u32); 2] = [
    ("summarizer-6d9f7b8c4-h7m2q", 48091),
    ("summarizer-6d9f7b8c4-w4t9n", 48092),
];

/// What the demo's API server and kubelet serve for GPU 8.
pub struct DraDemo {
    pub pods: Vec<PodPlan>,
    pub slice: ResourceSlice,
    /// The ResourceClaim as `resource.k8s.io/v1` JSON, allocated and reserved for the pods.
    pub claim: Value,
}

pub fn demo(gpus: &[GpuSample], node: &str) -> DraDemo {
    let uuid = gpus.get(GPU).map(|g| g.uuid.clone()).unwrap_or_default();
    let mut pods: Vec<PodPlan> = TENANTS
        .iter()
        .map(|(name, pid)| {
            let mut p = plan::pod(
                NAMESPACE,
                name,
                Some(("ReplicaSet", "summarizer-6d9f7b8c4")),
                "summarizer",
                "inference",
                "server",
                "",
                Vec::new(),
                vec![*pid],
            );
            p.claims = vec![(POD_CLAIM.into(), CLAIM.into())];
            for c in &mut p.containers {
                c.dynamic.push(DynamicDevice {
                    claim_name: CLAIM.into(),
                    claim_namespace: NAMESPACE.into(),
                    driver: DRIVER.into(),
                    pool: node.into(),
                    device: DEVICE.into(),
                    share_id: None,
                });
            }
            p
        })
        .collect();
    let claim = claim(node, &pods);
    // The driver runs one MPS control daemon per claim, as a Deployment in its own namespace;
    // its server is a process on the GPU that belongs to no tenant.
    pods.push(plan::pod(
        "nvidia-dra-driver-gpu",
        "mps-control-daemon-summarizer-mps-5f8d7c9b6-k2x8p",
        Some(("ReplicaSet", "mps-control-daemon-summarizer-mps-5f8d7c9b6")),
        "mps-control-daemon",
        "platform",
        "mps-control-daemon",
        "",
        Vec::new(),
        vec![SERVER_PID],
    ));
    DraDemo {
        pods,
        slice: slice(node, &uuid),
        claim,
    }
}

fn slice(node: &str, uuid: &str) -> ResourceSlice {
    let attr = |s: &str| DeviceAttribute {
        string: Some(s.into()),
        ..Default::default()
    };
    ResourceSlice {
        metadata: ObjectMeta {
            name: Some(format!("{node}-{DRIVER}-gpus")),
            ..Default::default()
        },
        spec: ResourceSliceSpec {
            driver: DRIVER.into(),
            node_name: Some(node.into()),
            pool: ResourcePool {
                name: node.into(),
                generation: 1,
                resource_slice_count: 1,
            },
            devices: Some(vec![Device {
                name: DEVICE.into(),
                attributes: Some(BTreeMap::from([
                    ("uuid".into(), attr(uuid)),
                    ("type".into(), attr("gpu")),
                    ("productName".into(), attr("NVIDIA H100 80GB HBM3")),
                ])),
                ..Default::default()
            }]),
            ..Default::default()
        },
    }
}

fn claim(node: &str, tenants: &[PodPlan]) -> Value {
    let mps = json!({"apiVersion": "resource.nvidia.com/v1beta1", "kind": "GpuConfig",
        "sharing": {"strategy": "MPS", "mpsConfig": {
            "defaultActiveThreadPercentage": 30,
            "defaultPinnedDeviceMemoryLimit": "8Gi"}}});
    json!({
        "apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
        "metadata": {"namespace": NAMESPACE, "name": CLAIM, "uid": "5c1e2d4a-8b7f-4e3a-9d60-2f1b7a8c9e01",
            "resourceVersion": "1"},
        "spec": {"devices": {
            "requests": [{"name": "gpu", "exactly": {"deviceClassName": DRIVER,
                "allocationMode": "ExactCount", "count": 1}}],
            "config": [{"requests": ["gpu"], "opaque": {"driver": DRIVER, "parameters": mps}}]}},
        "status": {
            "allocation": {"devices": {
                "results": [{"request": "gpu", "driver": DRIVER, "pool": node, "device": DEVICE}],
                "config": [{"source": "FromClaim", "requests": ["gpu"],
                    "opaque": {"driver": DRIVER, "parameters": mps}}]}},
            "reservedFor": tenants.iter()
                .map(|p| json!({"resource": "pods", "name": p.name, "uid": p.uid()}))
                .collect::<Vec<_>>()
        }
    })
}

#[cfg(test)]
#[path = "dra_tests.rs"]
mod tests;

//! A small description of pods on a node, turned into what the real sources read: a kubelet
//! pod-resources answer, Pod objects for the API server, and cgroup files in a procfs tree.
//! The demo node and the end-to-end tests both build their clusters with it.

use std::collections::BTreeMap;
use std::hash::{Hash, Hasher};
use std::path::Path;

use k8s_openapi::api::core::v1::{
    Container, ContainerStatus, Node, Pod, PodResourceClaim, PodSpec, PodStatus,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};

use crate::fakes::kubelet::{FakeContainer, FakeKubeletState, FakePod};
use tessera_exporter::model::allocations::DynamicDevice;

#[derive(Debug, Clone, Default)]
pub struct ContainerPlan {
    pub name: String,
    /// (resource name, device IDs) the kubelet allocated.
    pub devices: Vec<(String, Vec<String>)>,
    /// Host PIDs of the container's processes.
    pub pids: Vec<u32>,
    /// DRA devices the kubelet reports for the container.
    pub dynamic: Vec<DynamicDevice>,
}

#[derive(Debug, Clone, Default)]
pub struct PodPlan {
    pub namespace: String,
    pub name: String,
    /// Controller owner, e.g. ("ReplicaSet", "web-7d9f8c6b5"); none for a bare pod.
    pub owner: Option<(String, String)>,
    pub labels: BTreeMap<String, String>,
    /// Scheduler annotations (HAMi's, Volcano's, KAI's) as the API server would show them.
    pub annotations: BTreeMap<String, String>,
    pub containers: Vec<ContainerPlan>,
    /// `spec.resourceClaims`: (the pod's name for the claim, the ResourceClaim it names).
    pub claims: Vec<(String, String)>,
}

fn hash64(parts: &[&str]) -> u64 {
    let mut h = std::collections::hash_map::DefaultHasher::new();
    parts.hash(&mut h);
    h.finish()
}

impl PodPlan {
    /// A pod with one container `main` holding `ids` of `resource` (nothing when `ids` is
    /// empty) and running `pids`.
    pub fn single(ns: &str, name: &str, resource: &str, ids: &[String], pids: &[u32]) -> Self {
        PodPlan {
            namespace: ns.into(),
            name: name.into(),
            containers: vec![ContainerPlan {
                name: "main".into(),
                devices: if ids.is_empty() {
                    Vec::new()
                } else {
                    vec![(resource.into(), ids.to_vec())]
                },
                pids: pids.to_vec(),
                ..Default::default()
            }],
            ..Default::default()
        }
    }

    /// A stable pod UID derived from namespace and name.
    pub fn uid(&self) -> String {
        let a = hash64(&[&self.namespace, &self.name, "uid-a"]);
        let b = hash64(&[&self.namespace, &self.name, "uid-b"]);
        let hex = format!("{a:016x}{b:016x}");
        format!(
            "{}-{}-{}-{}-{}",
            &hex[0..8],
            &hex[8..12],
            &hex[12..16],
            &hex[16..20],
            &hex[20..32]
        )
    }

    /// A stable 64-hex container ID.
    pub fn container_id(&self, container: &str) -> String {
        (0..4)
            .map(|i| {
                format!(
                    "{:016x}",
                    hash64(&[&self.namespace, &self.name, container, &i.to_string()])
                )
            })
            .collect()
    }

    /// The cgroup v2 path the systemd driver and containerd give the container.
    pub fn cgroup_path(&self, container: &str) -> String {
        format!(
            "/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod{}.slice/cri-containerd-{}.scope",
            self.uid().replace('-', "_"),
            self.container_id(container)
        )
    }

    pub fn to_pod(&self, node: &str) -> Pod {
        Pod {
            metadata: ObjectMeta {
                name: Some(self.name.clone()),
                namespace: Some(self.namespace.clone()),
                uid: Some(self.uid()),
                labels: (!self.labels.is_empty()).then(|| self.labels.clone()),
                annotations: (!self.annotations.is_empty()).then(|| self.annotations.clone()),
                owner_references: self.owner.as_ref().map(|(kind, name)| {
                    vec![OwnerReference {
                        api_version: "apps/v1".into(),
                        kind: kind.clone(),
                        name: name.clone(),
                        uid: format!("owner-{name}"),
                        controller: Some(true),
                        ..Default::default()
                    }]
                }),
                ..Default::default()
            },
            spec: Some(PodSpec {
                node_name: Some(node.to_owned()),
                containers: self
                    .containers
                    .iter()
                    .map(|c| Container {
                        name: c.name.clone(),
                        ..Default::default()
                    })
                    .collect(),
                resource_claims: (!self.claims.is_empty()).then(|| {
                    self.claims
                        .iter()
                        .map(|(name, claim)| PodResourceClaim {
                            name: name.clone(),
                            resource_claim_name: Some(claim.clone()),
                            ..Default::default()
                        })
                        .collect()
                }),
                ..Default::default()
            }),
            status: Some(PodStatus {
                phase: Some("Running".into()),
                container_statuses: Some(
                    self.containers
                        .iter()
                        .map(|c| ContainerStatus {
                            name: c.name.clone(),
                            container_id: Some(format!(
                                "containerd://{}",
                                self.container_id(&c.name)
                            )),
                            ready: true,
                            ..Default::default()
                        })
                        .collect(),
                ),
                ..Default::default()
            }),
        }
    }

    pub fn to_fake(&self) -> FakePod {
        FakePod {
            namespace: self.namespace.clone(),
            name: self.name.clone(),
            containers: self
                .containers
                .iter()
                .map(|c| FakeContainer {
                    name: c.name.clone(),
                    devices: c.devices.clone(),
                    dynamic: c.dynamic.clone(),
                })
                .collect(),
        }
    }
}

pub fn kubelet_state(pods: &[PodPlan], allocatable: Vec<(String, String)>) -> FakeKubeletState {
    FakeKubeletState {
        pods: pods.iter().map(PodPlan::to_fake).collect(),
        allocatable,
        ..Default::default()
    }
}

pub fn node(name: &str, labels: BTreeMap<String, String>) -> Node {
    Node {
        metadata: ObjectMeta {
            name: Some(name.to_owned()),
            labels: Some(labels),
            ..Default::default()
        },
        ..Default::default()
    }
}

/// A kubeconfig that points kube clients at a (fake) API server, for tests and tools.
pub fn write_kubeconfig(dir: &Path, url: &str) -> std::io::Result<std::path::PathBuf> {
    let path = dir.join("kubeconfig");
    std::fs::write(
        &path,
        format!(
            "apiVersion: v1\nkind: Config\ncurrent-context: fake\nclusters: [{{name: fake, cluster: {{server: \"{url}\"}}}}]\n\
             contexts: [{{name: fake, context: {{cluster: fake, user: fake}}}}]\nusers: [{{name: fake, user: {{}}}}]\n"
        ),
    )?;
    Ok(path)
}

/// Writes `/proc/<pid>/cgroup` for every planned process.
pub fn write_cgroups(pods: &[PodPlan], procfs: &Path) -> std::io::Result<()> {
    for pod in pods {
        for c in &pod.containers {
            for pid in &c.pids {
                let dir = procfs.join(pid.to_string());
                std::fs::create_dir_all(&dir)?;
                std::fs::write(
                    dir.join("cgroup"),
                    format!("0::{}\n", pod.cgroup_path(&c.name)),
                )?;
            }
        }
    }
    Ok(())
}

#[cfg(test)]
#[path = "cluster_tests.rs"]
mod tests;

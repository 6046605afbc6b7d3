//! Pods of this node: the reflector that follows them and their conversion to [`PodMeta`].

use std::collections::HashMap;

use ::kube::api::Api;
use ::kube::runtime::reflector::{self, Store};
use ::kube::runtime::{watcher, WatchStreamExt};
use ::kube::ResourceExt;
use futures::stream::BoxStream;
use futures::StreamExt;
use k8s_openapi::api::core::v1::{ContainerStatus, Pod};

use crate::model::cluster::{normalize_uid, strip_scheme, ContainerMeta, PodMeta};
use crate::model::fractional::{self, PodParts, PodSharing};

/// Annotation carrying a static pod's config hash, which is the pod UID in its cgroup path.
pub const CONFIG_HASH_ANNOTATION: &str = "kubernetes.io/config.hash";
/// Set on mirror pods to the same hash; read when `config.hash` is absent.
pub const CONFIG_MIRROR_ANNOTATION: &str = "kubernetes.io/config.mirror";
const POD_TEMPLATE_HASH_LABEL: &str = "pod-template-hash";

/// Server-side watch timeout: the API server ends each watch after this, and the client
/// resumes from its last resource version. Must stay below the client's read timeout.
pub(super) const WATCH_TIMEOUT_SECS: u32 = 120;

/// A running pod reflector: `store` fills from `events`, which must be polled.
pub(super) struct PodWatch {
    pub store: Store<Pod>,
    pub events: BoxStream<'static, Result<watcher::Event<Pod>, watcher::Error>>,
}

impl PodWatch {
    /// Lists then watches pods with `spec.nodeName=<node>`, retrying with kube-rs's default
    /// backoff; kube-rs relists by itself when a watch reports 410 Gone.
    pub fn start(api: Api<Pod>, node_name: &str) -> Self {
        let (store, writer) = reflector::store();
        let config = watcher::Config::default()
            .fields(&format!("spec.nodeName={node_name}"))
            .timeout(WATCH_TIMEOUT_SECS);
        let events = watcher(api, config)
            .modify(slim)
            .default_backoff()
            .reflect(writer)
            .boxed();
        Self { store, events }
    }
}

/// Drops what tessera never reads before the pod enters the cache: managed fields and
/// annotations (`last-applied-configuration` alone can be as big as the pod) dominate memory.
fn slim(pod: &mut Pod) {
    pod.managed_fields_mut().clear();
    if let Some(ann) = pod.metadata.annotations.as_mut() {
        ann.retain(|k, _| {
            k == CONFIG_HASH_ANNOTATION
                || k == CONFIG_MIRROR_ANNOTATION
                || k == fractional::KAI_RESERVED_GPU
                || fractional::ANNOTATIONS.contains(&k.as_str())
        });
    }
}

impl PodMeta {
    pub fn from_pod(pod: &Pod, allowed_labels: &[String]) -> Self {
        let meta = &pod.metadata;
        let labels = meta.labels.as_ref();
        let copied = allowed_labels
            .iter()
            .filter_map(|k| Some((k.clone(), labels?.get(k)?.clone())))
            .collect();
        let annotations = meta.annotations.as_ref();
        let config_hash = annotations
            .and_then(|a| {
                a.get(CONFIG_HASH_ANNOTATION)
                    .or_else(|| a.get(CONFIG_MIRROR_ANNOTATION))
            })
            .map(|h| normalize_uid(h))
            .filter(|h| !h.is_empty());
        let (owner_kind, owner_name) = owner(pod).unzip();
        Self {
            uid: meta.uid.as_deref().map(normalize_uid).unwrap_or_default(),
            namespace: meta.namespace.clone().unwrap_or_default(),
            name: meta.name.clone().unwrap_or_default(),
            owner_kind,
            owner_name,
            labels: copied,
            config_hash,
            containers: containers(pod),
            phase: pod.status.as_ref().and_then(|s| s.phase.clone()),
            sharing: sharing(pod),
            dra_claims: claim_names(pod),
            init_containers: run_to_completion_init_containers(pod),
        }
    }
}

/// Claims the pod uses: named in its spec, or generated from a template and named in its
/// status once created. Capped: a pod may list at most 128 claims.
fn claim_names(pod: &Pod) -> Vec<String> {
    const MAX: usize = 128;
    let direct = pod
        .spec
        .iter()
        .flat_map(|s| s.resource_claims.iter().flatten())
        .filter_map(|c| c.resource_claim_name.clone());
    let generated = pod
        .status
        .iter()
        .flat_map(|s| s.resource_claim_statuses.iter().flatten())
        .filter_map(|c| c.resource_claim_name.clone());
    let mut names: Vec<String> = direct
        .chain(generated)
        .filter(|n| !n.is_empty())
        .take(2 * MAX)
        .collect();
    names.sort();
    names.dedup();
    names.truncate(MAX);
    names
}

/// The fractional-scheduler and MPS facts of the pod; only literal env values are seen.
fn sharing(pod: &Pod) -> PodSharing {
    let spec = pod.spec.as_ref();
    let init = spec
        .and_then(|s| s.init_containers.as_deref())
        .unwrap_or(&[]);
    let regular = spec.map(|s| s.containers.as_slice()).unwrap_or(&[]);
    let env = init
        .iter()
        .chain(regular)
        .map(|c| {
            let vars = c
                .env
                .iter()
                .flatten()
                .filter_map(|e| Some((e.name.as_str(), e.value.as_deref()?)))
                .collect();
            (c.name.as_str(), vars)
        })
        .collect();
    PodSharing::from_parts(&PodParts {
        namespace: pod.metadata.namespace.as_deref().unwrap_or_default(),
        annotations: pod.metadata.annotations.as_ref(),
        labels: pod.metadata.labels.as_ref(),
        init_containers: init.iter().map(|c| c.name.as_str()).collect(),
        containers: regular.iter().map(|c| c.name.as_str()).collect(),
        env,
    })
}

/// Init containers without `restartPolicy: Always` (those are sidecars, which run beside the
/// app containers and which pod-resources lists).
fn run_to_completion_init_containers(pod: &Pod) -> Vec<String> {
    pod.spec
        .iter()
        .flat_map(|s| s.init_containers.iter().flatten())
        .filter(|c| c.restart_policy.as_deref() != Some("Always"))
        .map(|c| c.name.clone())
        .collect()
}

/// The controlling workload. A ReplicaSet whose name is `<deployment>-<pod-template-hash>`
/// was made by a Deployment; a Job's CronJob is not visible from the pod, so it stays `Job`.
fn owner(pod: &Pod) -> Option<(String, String)> {
    let r = pod
        .owner_references()
        .iter()
        .find(|r| r.controller == Some(true))?;
    if r.kind == "ReplicaSet" {
        let hash = pod
            .labels()
            .get(POD_TEMPLATE_HASH_LABEL)
            .filter(|h| !h.is_empty());
        if let Some(deployment) =
            hash.and_then(|h| r.name.strip_suffix(h.as_str())?.strip_suffix('-'))
        {
            if !deployment.is_empty() {
                return Some(("Deployment".to_string(), deployment.to_string()));
            }
        }
    }
    Some((r.kind.clone(), r.name.clone()))
}

fn containers(pod: &Pod) -> Vec<ContainerMeta> {
    let status = pod.status.as_ref();
    let statuses = [
        status.and_then(|s| s.init_container_statuses.as_ref()),
        status.and_then(|s| s.container_statuses.as_ref()),
        status.and_then(|s| s.ephemeral_container_statuses.as_ref()),
    ];
    let mut ids: HashMap<&str, Option<String>> = HashMap::new();
    let mut status_order: Vec<&str> = Vec::new();
    for s in statuses
        .into_iter()
        .flatten()
        .flat_map(|v: &Vec<ContainerStatus>| v.iter())
    {
        ids.insert(
            s.name.as_str(),
            s.container_id.as_deref().and_then(strip_scheme),
        );
        status_order.push(s.name.as_str());
    }
    let spec = pod.spec.as_ref();
    let spec_names = spec
        .into_iter()
        .flat_map(|s| s.init_containers.iter().flatten().map(|c| c.name.as_str()))
        .chain(
            spec.into_iter()
                .flat_map(|s| s.containers.iter().map(|c| c.name.as_str())),
        )
        .chain(spec.into_iter().flat_map(|s| {
            s.ephemeral_containers
                .iter()
                .flatten()
                .map(|c| c.name.as_str())
        }));
    let mut out: Vec<ContainerMeta> = Vec::new();
    // Statuses without a spec entry should not exist; keep them anyway, their IDs are evidence.
    for name in spec_names.chain(status_order) {
        if out.iter().any(|c| c.name == name) {
            continue;
        }
        let container_id = ids.get(name).cloned().flatten();
        out.push(ContainerMeta {
            name: name.to_string(),
            container_id,
        });
    }
    out
}

#[cfg(test)]
#[path = "pods_tests.rs"]
mod tests;

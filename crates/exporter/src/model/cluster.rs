//! The node as the Kubernetes API describes it: its pods, its device-plugin labels and its DRA
//! devices, as plain data. The Kubernetes source fills it; the join reads it.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use super::dra;
use super::dra_claim::{DeviceKey, DraClaim, DraDevice, DraDeviceConfig};
use super::fractional::PodSharing;

/// What tessera knows about one pod on this node.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct PodMeta {
    /// Normalized: lowercase with dashes.
    pub uid: String,
    pub namespace: String,
    pub name: String,
    /// Controller workload kind (a ReplicaSet made by a Deployment reads `Deployment`).
    pub owner_kind: Option<String>,
    pub owner_name: Option<String>,
    /// Only the allow-listed labels, values verbatim (escaping is the encoder's job).
    pub labels: BTreeMap<String, String>,
    /// Static pods: `kubernetes.io/config.hash`, lowercase, as the kubelet wrote it.
    pub config_hash: Option<String>,
    /// Init, regular, then ephemeral containers, in spec order.
    pub containers: Vec<ContainerMeta>,
    pub phase: Option<String>,
    /// Fractional-scheduler grants, KAI reservation and MPS limits from annotations and env.
    pub sharing: PodSharing,
    /// Names of the ResourceClaims the pod uses (in its namespace), sorted.
    pub dra_claims: Vec<String>,
    /// Its init containers that run to completion (not restartable sidecars). The kubelet
    /// lends them the devices it allocates to the pod's app containers (they never run at
    /// once), and pod-resources does not list them.
    pub init_containers: Vec<String>,
}

#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ContainerMeta {
    pub name: String,
    /// Runtime scheme (`containerd://`, `cri-o://`, `docker://`) stripped; None until started.
    pub container_id: Option<String>,
}

/// Lowercase with dashes: cgroup paths of the systemd driver spell UIDs with underscores.
pub fn normalize_uid(uid: &str) -> String {
    uid.trim().to_ascii_lowercase().replace('_', "-")
}

/// `0123…` (32 hex digits) as `01234567-89ab-cdef-0123-456789abcdef`; None if not 32 hex.
pub fn dashed_uid(hex: &str) -> Option<String> {
    if hex.len() != 32 || !hex.bytes().all(|b| b.is_ascii_hexdigit()) {
        return None;
    }
    let h = hex.to_ascii_lowercase();
    Some(format!(
        "{}-{}-{}-{}-{}",
        &h[0..8],
        &h[8..12],
        &h[12..16],
        &h[16..20],
        &h[20..32]
    ))
}

/// A container ID without its runtime scheme, lowercase like the cgroup parser's; None for
/// the empty ID of a container not yet started.
pub fn strip_scheme(id: &str) -> Option<String> {
    let id = id.split_once("://").map_or(id, |(_, rest)| rest).trim();
    (!id.is_empty()).then(|| id.to_ascii_lowercase())
}

pub const SHARING_STRATEGY_LABEL: &str = "nvidia.com/gpu.sharing-strategy";

pub const REPLICAS_LABEL: &str = "nvidia.com/gpu.replicas";

pub const MIG_STRATEGY_LABEL: &str = "nvidia.com/mig.strategy";

pub const PRODUCT_LABEL: &str = "nvidia.com/gpu.product";

/// Per-profile labels are `nvidia.com/mig-<profile>.sharing-strategy` and `.replicas`.
const MIG_PROFILE_PREFIX: &str = "nvidia.com/mig-";

/// How the device plugin offers a device (`nvidia.com/…sharing-strategy`).
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum SharingStrategy {
    /// `none`: each device goes to one container.
    None,
    TimeSlicing,
    Mps,
    /// A value this version does not know, kept so it can be reported rather than guessed.
    Other(String),
}

impl SharingStrategy {
    pub fn parse(value: &str) -> Self {
        match value.trim().to_ascii_lowercase().as_str() {
            "none" => Self::None,
            "time-slicing" => Self::TimeSlicing,
            "mps" => Self::Mps,
            _ => Self::Other(value.to_string()),
        }
    }

    pub fn as_str(&self) -> &str {
        match self {
            Self::None => "none",
            Self::TimeSlicing => "time-slicing",
            Self::Mps => "mps",
            Self::Other(s) => s,
        }
    }
}

/// Sharing facts of this node. Absent labels stay `None`: "not labelled" is not "not shared".
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct NodeSharing {
    pub strategy: Option<SharingStrategy>,
    pub replicas: Option<u32>,
    /// `none`, `single` or `mixed`, verbatim.
    pub mig_strategy: Option<String>,
    /// MIG profile (`1g.10gb`, `1g.10gb.me`) → its own sharing strategy and replicas.
    pub per_profile: BTreeMap<String, (Option<SharingStrategy>, Option<u32>)>,
    pub product: Option<String>,
}

impl NodeSharing {
    pub fn from_labels(labels: &BTreeMap<String, String>) -> Self {
        let mut per_profile: BTreeMap<String, (Option<SharingStrategy>, Option<u32>)> =
            BTreeMap::new();
        for (key, value) in labels {
            let Some(rest) = key.strip_prefix(MIG_PROFILE_PREFIX) else {
                continue;
            };
            if let Some(profile) = rest
                .strip_suffix(".sharing-strategy")
                .filter(|p| !p.is_empty())
            {
                per_profile.entry(profile.to_string()).or_default().0 =
                    Some(SharingStrategy::parse(value));
            } else if let Some(profile) = rest.strip_suffix(".replicas").filter(|p| !p.is_empty()) {
                per_profile.entry(profile.to_string()).or_default().1 = parse_replicas(value);
            }
        }
        Self {
            strategy: labels
                .get(SHARING_STRATEGY_LABEL)
                .map(|v| SharingStrategy::parse(v)),
            replicas: labels.get(REPLICAS_LABEL).and_then(|v| parse_replicas(v)),
            mig_strategy: labels.get(MIG_STRATEGY_LABEL).cloned(),
            per_profile,
            product: labels.get(PRODUCT_LABEL).cloned(),
        }
    }
}

/// A malformed count is treated as unknown rather than as 0 or 1.
fn parse_replicas(v: &str) -> Option<u32> {
    v.trim().parse().ok()
}

/// Pods of this node with lookups by every key the other sources produce, plus the node's
/// sharing labels and DRA devices. Plain data; rebuilt whole on change, never mutated.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ClusterView {
    /// Sorted by namespace, name.
    pub pods: Vec<Arc<PodMeta>>,
    pub node: NodeSharing,
    pub node_labels: BTreeMap<String, String>,
    /// Sorted by driver, pool, device.
    pub dra_devices: Vec<DraDevice>,
    by_uid: HashMap<String, usize>,
    by_config_hash: HashMap<String, usize>,
    by_container_id: HashMap<String, (usize, String)>,
    by_ns_name: HashMap<(String, String), usize>,
    by_dra: HashMap<(String, String, String), usize>,
    /// Claims of this node's pods, sorted by namespace, name.
    pub dra_claims: Vec<DraClaim>,
    /// `(namespace, claim)` → each allocated device's config, once resolved against the slices.
    by_claim_device: HashMap<(String, String), HashMap<DeviceKey, Arc<DraDeviceConfig>>>,
}

impl ClusterView {
    pub fn new(
        mut pods: Vec<PodMeta>,
        node_labels: BTreeMap<String, String>,
        mut dra_devices: Vec<DraDevice>,
    ) -> Self {
        pods.sort_by(|a, b| (&a.namespace, &a.name).cmp(&(&b.namespace, &b.name)));
        dra_devices.sort();
        let mut v = Self {
            node: NodeSharing::from_labels(&node_labels),
            node_labels,
            ..Self::default()
        };
        for (i, p) in pods.iter().enumerate() {
            v.by_uid.insert(p.uid.clone(), i);
            // A static pod's cgroup path carries the config hash, not the mirror pod's UID;
            // index the hash both as written and in UID form so either spelling finds it.
            if let Some(h) = &p.config_hash {
                v.by_config_hash.insert(h.clone(), i);
                if let Some(d) = dashed_uid(h) {
                    v.by_config_hash.insert(d, i);
                }
            }
            for c in &p.containers {
                if let Some(id) = &c.container_id {
                    v.by_container_id.insert(id.clone(), (i, c.name.clone()));
                }
            }
            v.by_ns_name
                .insert((p.namespace.clone(), p.name.clone()), i);
        }
        for (i, d) in dra_devices.iter().enumerate() {
            v.by_dra
                .insert((d.driver.clone(), d.pool.clone(), d.device.clone()), i);
        }
        v.pods = pods.into_iter().map(Arc::new).collect();
        v.dra_devices = dra_devices;
        v
    }

    /// By pod UID in any spelling (upper case, `_` for `-`, 32 hex without dashes), or by a
    /// static pod's config hash, which is what its cgroup path shows.
    pub fn pod_by_uid(&self, uid: &str) -> Option<&PodMeta> {
        let key = normalize_uid(uid);
        let idx = self
            .by_uid
            .get(&key)
            .or_else(|| self.by_config_hash.get(&key))
            .or_else(|| {
                let d = dashed_uid(&key)?;
                self.by_uid.get(&d).or_else(|| self.by_config_hash.get(&d))
            })?;
        self.pods.get(*idx).map(Arc::as_ref)
    }

    /// By container ID, with or without a runtime scheme; returns the pod and container name.
    pub fn pod_by_container_id(&self, id: &str) -> Option<(&PodMeta, &str)> {
        let id = strip_scheme(id)?;
        let (idx, name) = self.by_container_id.get(&id)?;
        Some((self.pods.get(*idx)?.as_ref(), name.as_str()))
    }

    /// Whether `container` is one of the pod's run-to-completion init containers.
    pub fn is_init_container(&self, namespace: &str, pod: &str, container: &str) -> bool {
        self.pod_by_name(namespace, pod)
            .is_some_and(|p| p.init_containers.iter().any(|c| c == container))
    }

    pub fn pod_by_name(&self, namespace: &str, name: &str) -> Option<&PodMeta> {
        let idx = self
            .by_ns_name
            .get(&(namespace.to_string(), name.to_string()))?;
        self.pods.get(*idx).map(Arc::as_ref)
    }

    /// Adds the pods' ResourceClaims, resolving their configs against this view's devices.
    pub fn with_claims(mut self, mut claims: Vec<DraClaim>) -> Self {
        claims.sort_by(|a, b| (&a.namespace, &a.name).cmp(&(&b.namespace, &b.name)));
        let mut by_claim = HashMap::new();
        for c in &claims {
            let devices: HashMap<DeviceKey, Arc<DraDeviceConfig>> =
                dra::resolve(c, |dr, p, d| self.dra_device(dr, p, d))
                    .into_iter()
                    .map(|(k, v)| (k, Arc::new(v)))
                    .collect();
            by_claim.insert((c.namespace.clone(), c.name.clone()), devices);
        }
        self.by_claim_device = by_claim;
        self.dra_claims = claims;
        self
    }

    /// What the claim's config says about one of its devices, if it says anything.
    pub fn dra_config(
        &self,
        namespace: &str,
        claim: &str,
        driver: &str,
        pool: &str,
        device: &str,
    ) -> Option<&Arc<DraDeviceConfig>> {
        self.by_claim_device
            .get(&(namespace.to_owned(), claim.to_owned()))?
            .get(&(driver.to_owned(), pool.to_owned(), device.to_owned()))
    }

    /// The device a kubelet `dynamic_resources` entry names.
    pub fn dra_device(&self, driver: &str, pool: &str, device: &str) -> Option<&DraDevice> {
        let idx = self
            .by_dra
            .get(&(driver.to_string(), pool.to_string(), device.to_string()))?;
        self.dra_devices.get(*idx)
    }
}

#[cfg(test)]
#[path = "cluster_node_sharing_tests.rs"]
mod node_sharing_tests;
#[cfg(test)]
#[path = "cluster_tests.rs"]
mod tests;

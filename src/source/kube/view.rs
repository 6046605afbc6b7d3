//! The immutable, indexed picture of this node that the Kubernetes source publishes.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use super::node::NodeSharing;
use super::pods::{dashed_uid, normalize_uid, strip_scheme, PodMeta};
use super::slices::DraDevice;

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

    pub fn pod_by_name(&self, namespace: &str, name: &str) -> Option<&PodMeta> {
        let idx = self
            .by_ns_name
            .get(&(namespace.to_string(), name.to_string()))?;
        self.pods.get(*idx).map(Arc::as_ref)
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
mod tests {
    use super::*;
    use crate::source::kube::pods::ContainerMeta;

    fn pod(ns: &str, name: &str, uid: &str, hash: Option<&str>, ids: &[(&str, &str)]) -> PodMeta {
        PodMeta {
            uid: uid.into(),
            namespace: ns.into(),
            name: name.into(),
            config_hash: hash.map(Into::into),
            containers: ids
                .iter()
                .map(|(n, id)| ContainerMeta {
                    name: (*n).into(),
                    container_id: Some((*id).into()),
                })
                .collect(),
            ..PodMeta::default()
        }
    }

    #[test]
    fn lookups() {
        let v = ClusterView::new(
            vec![
                pod(
                    "b",
                    "web",
                    "11111111-2222-3333-4444-555555555555",
                    None,
                    &[("main", "c1")],
                ),
                pod(
                    "a",
                    "etcd",
                    "99999999-0000-0000-0000-000000000000",
                    Some("0123456789abcdef0123456789abcdef"),
                    &[("etcd", "c2")],
                ),
            ],
            BTreeMap::new(),
            vec![DraDevice {
                driver: "d".into(),
                pool: "p".into(),
                device: "gpu-0".into(),
                ..Default::default()
            }],
        );
        assert_eq!(v.pods[0].name, "etcd", "sorted by namespace");
        assert_eq!(
            v.pod_by_uid("11111111_2222_3333_4444_555555555555")
                .map(|p| p.name.as_str()),
            Some("web")
        );
        assert_eq!(v.pod_by_uid("111111112222333344445555555555 55"), None);
        assert_eq!(
            v.pod_by_uid("11111111222233334444555555555555")
                .map(|p| p.name.as_str()),
            Some("web")
        );
        assert_eq!(
            v.pod_by_uid("0123456789ABCDEF0123456789ABCDEF")
                .map(|p| p.name.as_str()),
            Some("etcd")
        );
        assert_eq!(
            v.pod_by_uid("01234567-89ab-cdef-0123-456789abcdef")
                .map(|p| p.name.as_str()),
            Some("etcd")
        );
        assert_eq!(
            v.pod_by_uid("99999999-0000-0000-0000-000000000000")
                .map(|p| p.name.as_str()),
            Some("etcd")
        );
        assert_eq!(
            v.pod_by_container_id("containerd://c1")
                .map(|(p, c)| (p.name.as_str(), c)),
            Some(("web", "main"))
        );
        assert_eq!(v.pod_by_container_id("c2").map(|(_, c)| c), Some("etcd"));
        assert!(v.pod_by_container_id("").is_none());
        assert_eq!(
            v.pod_by_name("b", "web").map(|p| p.uid.as_str()),
            Some("11111111-2222-3333-4444-555555555555")
        );
        assert!(v.pod_by_name("a", "web").is_none());
        assert!(v.dra_device("d", "p", "gpu-0").is_some());
        assert!(v.dra_device("d", "p", "gpu-1").is_none());
    }
}

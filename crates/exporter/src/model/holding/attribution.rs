//! Who holds and who uses each device: kubelet allocations resolved to GPUs and MIG instances,
//! and processes resolved to containers through their cgroups. Pure: plain data in and out.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use serde::Serialize;

use super::grants;
use crate::model::allocations::Allocations;
use crate::model::cluster::ClusterView;
use crate::model::device_id::{parse_device_id, ResourceMatcher};
use crate::model::fractional::{split_placeholder_id, Grant, VOLCANO_RESOURCE};
use crate::model::holding::{DeviceIndex, Holding, PodRef, Pods, Target};
use crate::model::identity::CgroupIdentity;

#[derive(Debug, Default, Clone, PartialEq, Serialize)]
pub struct AttributionStats {
    /// Device IDs of GPU resources that name no device NVML reports.
    pub unresolved_device_ids: usize,
    /// Processes whose cgroup names a pod the API server does not know (or is not asked).
    pub processes_without_pod_metadata: usize,
}

/// Allocations per device, from pod-resources (and DRA through the cluster's ResourceSlices).
pub fn holdings(
    alloc: &Allocations,
    cluster: Option<&ClusterView>,
    resources: &ResourceMatcher,
    index: &DeviceIndex,
    pods: &mut Pods,
    stats: &mut AttributionStats,
) -> BTreeMap<Target, Vec<Holding>> {
    let mut out: BTreeMap<Target, Vec<Holding>> = BTreeMap::new();
    for c in &alloc.containers {
        let meta = cluster.and_then(|v| v.pod_by_name(&c.namespace, &c.pod));
        // HAMi and Volcano choose the GPU themselves: their annotation, not the kubelet's
        // placeholder IDs, says which one, once per container.
        let grants: Vec<&Grant> = meta
            .map(|m| {
                m.sharing
                    .grants_for(&c.container)
                    .filter(|g| g.uuid.is_some())
                    .collect()
            })
            .unwrap_or_default();
        let mut granted = false;
        for r in &c.devices {
            let gpu = resources.classify(&r.resource_name).is_some();
            if !grants.is_empty() && (gpu || r.resource_name == VOLCANO_RESOURCE) {
                if !granted {
                    granted = true;
                    let pod = pods.get(&c.namespace, &c.pod, &c.container, meta);
                    stats.unresolved_device_ids += grants::grant_holdings(
                        &mut out,
                        &grants,
                        &r.resource_name,
                        &r.device_ids,
                        index,
                        &pod,
                    );
                }
                continue;
            }
            if !gpu {
                continue;
            }
            for raw in &r.device_ids {
                let id = parse_device_id(raw);
                let placeholder = split_placeholder_id(raw);
                let resolved = index
                    .resolve(&id.device)
                    .or_else(|| index.by_uuid(placeholder?.0));
                let Some(target) = resolved else {
                    stats.unresolved_device_ids += 1;
                    continue;
                };
                out.entry(target).or_default().push(Holding {
                    pod: pods.get(&c.namespace, &c.pod, &c.container, meta),
                    resource: r.resource_name.clone(),
                    device_id: raw.clone(),
                    claim: String::new(),
                    replica: id.replica.is_some() || placeholder.is_some(),
                    grant: None,
                    dra: None,
                });
            }
        }
        for d in &c.dynamic {
            let Some(dev) = cluster.and_then(|v| v.dra_device(&d.driver, &d.pool, &d.device))
            else {
                stats.unresolved_device_ids += 1;
                continue;
            };
            let Some(target) = dev.uuid.as_deref().and_then(|u| index.by_uuid(u)) else {
                stats.unresolved_device_ids += 1;
                continue;
            };
            out.entry(target).or_default().push(Holding {
                pod: pods.get(&c.namespace, &c.pod, &c.container, meta),
                resource: d.driver.clone(),
                device_id: d.device.clone(),
                claim: format!("{}/{}", d.claim_namespace, d.claim_name),
                replica: d.share_id.is_some(),
                grant: None,
                dra: cluster
                    .and_then(|v| {
                        v.dra_config(
                            &d.claim_namespace,
                            &d.claim_name,
                            &d.driver,
                            &d.pool,
                            &d.device,
                        )
                    })
                    .cloned(),
            });
        }
    }
    grants::attach_kai(&mut out, cluster, index, pods);
    out
}

/// How many containers each device is offered to: the kubelet's allocatable IDs that resolve
/// to it (each `::N` replica counts once).
pub fn offered(
    alloc: &Allocations,
    resources: &ResourceMatcher,
    index: &DeviceIndex,
) -> HashMap<Target, u32> {
    let mut out = HashMap::new();
    for a in &alloc.allocatable {
        if resources.classify(&a.resource_name).is_none() {
            continue;
        }
        let resolved = index
            .resolve(&parse_device_id(&a.device_id).device)
            .or_else(|| index.by_uuid(split_placeholder_id(&a.device_id)?.0));
        if let Some(t) = resolved {
            *out.entry(t).or_default() += 1;
        }
    }
    out
}

/// The container a process runs in, from its cgroup and the pod metadata.
pub fn process_owner(
    cgroup: Option<&CgroupIdentity>,
    cluster: Option<&ClusterView>,
    pods: &mut Pods,
    stats: &mut AttributionStats,
) -> Option<Arc<PodRef>> {
    let id = cgroup?;
    if let (Some(view), Some(cid)) = (cluster, id.container_id.as_deref()) {
        if let Some((meta, container)) = view.pod_by_container_id(cid) {
            return Some(pods.get(&meta.namespace, &meta.name, container, Some(meta)));
        }
    }
    let uid = id.pod_uid.as_deref()?;
    if let Some(meta) = cluster.and_then(|v| v.pod_by_uid(uid)) {
        // The pod is known but this container is not (yet): name the pod, not the container.
        return Some(pods.get(&meta.namespace, &meta.name, "", Some(meta)));
    }
    // Without pod metadata a process keeps its pod UID, so it can still be told apart.
    stats.processes_without_pod_metadata += 1;
    Some(pods.get("", uid, "", None))
}

//! The holdings fractional schedulers create: HAMi's and Volcano's annotations replace the
//! kubelet's placeholder device IDs, and KAI's fraction pods take over their reservation pod's
//! GPU. Pure.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use crate::model::cluster::ClusterView;
use crate::model::fractional::{Grant, Scheduler, KAI_FRACTION};
use crate::model::holding::{DeviceIndex, Holding, PodRef, Pods, Target};

/// Holdings for a container's grants, in place of the kubelet's IDs of `resource`; raw IDs
/// are kept as `device_id` where they pair up one to one.
pub fn grant_holdings(
    out: &mut BTreeMap<Target, Vec<Holding>>,
    grants: &[&Grant],
    resource: &str,
    raw_ids: &[String],
    index: &DeviceIndex,
    pod: &Arc<PodRef>,
) -> usize {
    let mut unresolved = 0;
    let paired = raw_ids.len() == grants.len();
    for (i, g) in grants.iter().enumerate() {
        let Some(uuid) = g.uuid.as_deref() else {
            continue;
        };
        let Some(target) = index.by_uuid(uuid) else {
            unresolved += 1;
            continue;
        };
        let device_id = if paired {
            raw_ids[i].clone()
        } else {
            uuid.to_owned()
        };
        out.entry(target).or_default().push(Holding {
            pod: pod.clone(),
            resource: resource.to_owned(),
            device_id,
            claim: String::new(),
            replica: true,
            grant: Some((*g).clone()),
            dra: None,
        });
    }
    unresolved
}

/// A reservation's GPU, its UUID, and the reservation pod's namespace and name.
type Reserved = (Target, Option<String>, (String, String));

/// KAI: each fraction pod holds its group's reserved GPU; a reservation pod whose group has
/// fraction pods on this node stops counting as a holder (it is the scheduler's placeholder,
/// not a tenant), while one without any keeps its holding so it still shows as waste.
pub fn attach_kai(
    out: &mut BTreeMap<Target, Vec<Holding>>,
    cluster: Option<&ClusterView>,
    index: &DeviceIndex,
    pods: &mut Pods,
) {
    let Some(cluster) = cluster else { return };
    let mut groups: HashMap<&str, Reserved> = HashMap::new();
    for p in &cluster.pods {
        let Some(r) = &p.sharing.reservation else {
            continue;
        };
        let from_kubelet = || {
            out.iter().find_map(|(t, hs)| {
                let h = hs
                    .iter()
                    .find(|h| h.pod.namespace == p.namespace && h.pod.pod == p.name)?;
                Some((*t, h.device_id.split("::").next().map(str::to_owned)))
            })
        };
        let target = r
            .uuid
            .as_deref()
            .and_then(|u| Some((index.by_uuid(u)?, Some(u.to_owned()))))
            .or_else(from_kubelet);
        if let Some((t, uuid)) = target {
            groups.insert(&r.group, (t, uuid, (p.namespace.clone(), p.name.clone())));
        }
    }
    let mut used: Vec<(Target, (String, String))> = Vec::new();
    for p in &cluster.pods {
        let kai = p
            .sharing
            .grants
            .iter()
            .filter(|g| g.scheduler == Scheduler::Kai);
        for (group, grant) in p.sharing.kai_groups.iter().zip(kai) {
            let Some((target, uuid, reservation)) = groups.get(group.as_str()) else {
                continue;
            };
            let mut g = grant.clone();
            g.uuid = uuid.clone();
            out.entry(*target).or_default().push(Holding {
                pod: pods.get(&p.namespace, &p.name, &grant.container, Some(p)),
                resource: KAI_FRACTION.to_owned(),
                device_id: uuid.clone().unwrap_or_default(),
                claim: String::new(),
                replica: true,
                grant: Some(g),
                dra: None,
            });
            used.push((*target, reservation.clone()));
        }
    }
    for (target, (ns, name)) in used {
        if let Some(hs) = out.get_mut(&target) {
            hs.retain(|h| !(h.pod.namespace == ns && h.pod.pod == name && h.grant.is_none()));
        }
    }
}

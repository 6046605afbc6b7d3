//! Generated proto types → the plain types the rest of tessera sees.
//!
//! Nothing is filtered by resource name here: deciding which resources are GPUs is the
//! model's job. The only things left out are entries that break a sanity cap; they are
//! counted in `skipped` so the caller can report them instead of losing them silently.

use super::pb;
pub use crate::model::allocations::{
    Allocatable, AllocatableDevice, Allocations, ContainerAllocation, DynamicDevice,
    ResourceDevices,
};

/// More containers than any real node runs; past this the answer is treated as corrupt.
pub const MAX_CONTAINERS: usize = 100_000;
/// Cap on allocatable device entries, for the same reason.
pub const MAX_ALLOCATABLE: usize = 100_000;
/// Longest name or device ID kept. Real IDs are < 100 bytes; longer ones would only
/// become runaway label values.
pub const MAX_FIELD_LEN: usize = 1024;

fn fits(s: &str) -> bool {
    s.len() <= MAX_FIELD_LEN
}

/// Converts a `List` answer; `allocatable` is left empty for the caller to fill.
pub(crate) fn allocations_from_list(resp: pb::ListPodResourcesResponse) -> Allocations {
    let mut out = Allocations::default();
    for pod in resp.pod_resources {
        for container in pod.containers {
            if out.containers.len() >= MAX_CONTAINERS
                || !fits(&pod.namespace)
                || !fits(&pod.name)
                || !fits(&container.name)
            {
                out.skipped += 1;
                continue;
            }
            let devices = container
                .devices
                .into_iter()
                .filter_map(|d| resource_devices(d, &mut out.skipped))
                .collect();
            let mut dynamic = Vec::new();
            for claim in container.dynamic_resources {
                dynamic_devices(claim, &mut dynamic, &mut out.skipped);
            }
            out.containers.push(ContainerAllocation {
                namespace: pod.namespace.clone(),
                pod: pod.name.clone(),
                container: container.name,
                devices,
                dynamic,
            });
        }
    }
    out
}

fn resource_devices(d: pb::ContainerDevices, skipped: &mut usize) -> Option<ResourceDevices> {
    if !fits(&d.resource_name) {
        *skipped += d.device_ids.len().max(1);
        return None;
    }
    let total = d.device_ids.len();
    let device_ids: Vec<String> = d.device_ids.into_iter().filter(|id| fits(id)).collect();
    *skipped += total - device_ids.len();
    Some(ResourceDevices {
        resource_name: d.resource_name,
        device_ids,
    })
}

fn dynamic_devices(claim: pb::DynamicResource, out: &mut Vec<DynamicDevice>, skipped: &mut usize) {
    if !fits(&claim.claim_name) || !fits(&claim.claim_namespace) {
        *skipped += claim.claim_resources.len().max(1);
        return;
    }
    // A claim with no claim_resources holds no device, so there is nothing to attribute and
    // nothing is lost by emitting no entry for it.
    for res in claim.claim_resources {
        let share_ok = res.share_id.as_deref().is_none_or(fits);
        if !fits(&res.driver_name) || !fits(&res.pool_name) || !fits(&res.device_name) || !share_ok
        {
            *skipped += 1;
            continue;
        }
        out.push(DynamicDevice {
            claim_name: claim.claim_name.clone(),
            claim_namespace: claim.claim_namespace.clone(),
            driver: res.driver_name,
            pool: res.pool_name,
            device: res.device_name,
            share_id: res.share_id,
        });
    }
}

pub(crate) fn allocatable_from(resp: pb::AllocatableResourcesResponse) -> Allocatable {
    let mut out = Allocatable::default();
    for d in resp.devices {
        if !fits(&d.resource_name) {
            out.skipped += d.device_ids.len().max(1);
            continue;
        }
        for id in d.device_ids {
            if out.devices.len() >= MAX_ALLOCATABLE || !fits(&id) {
                out.skipped += 1;
                continue;
            }
            out.devices.push(AllocatableDevice {
                resource_name: d.resource_name.clone(),
                device_id: id,
            });
        }
    }
    out
}

#[cfg(test)]
#[path = "convert_tests.rs"]
mod tests;

//! Per-container GPU limits: a fractional scheduler's grant, the container's MPS variables,
//! or the MPS defaults of its DRA claim or device plugin. Pure.

use std::collections::HashMap;

use crate::model::cluster::ClusterView;
use crate::model::fractional::Grant;
use crate::model::holding::PodRef;
use crate::model::sharing::SharingMode;
use crate::model::view::{ContainerUse, GpuView, Limits};

/// Each container's limits on each device of one GPU: a scheduler's grant first, then the
/// container's own MPS variables, then the MPS defaults its DRA claim configures or the
/// device plugin's even MPS split (a device comes from one or the other, never both). The
/// container's variables win over the daemon's defaults because MPS applies them per client.
pub fn fill(gpu: &mut GpuView, cluster: Option<&ClusterView>, ordinals: &Ordinals) {
    let gpu_total = gpu.sample.memory.map(|m| m.total);
    for row in &mut gpu.containers {
        if row.allocations.is_empty() {
            continue;
        }
        let (total, replicas) = match &row.mig_uuid {
            Some(m) => match gpu.mig.iter().find(|v| &v.uuid == m) {
                Some(v) => (v.sample.memory.map(|m| m.total), v.replicas),
                None => (None, 0),
            },
            None => (gpu_total, gpu.replicas),
        };
        row.limits = limits_of(row, total, replicas, cluster, ordinals, &gpu.uuid);
    }
}

fn limits_of(
    row: &ContainerUse,
    total: Option<u64>,
    replicas: u32,
    cluster: Option<&ClusterView>,
    ordinals: &Ordinals,
    gpu_uuid: &str,
) -> Limits {
    let grants: Vec<&Grant> = row
        .allocations
        .iter()
        .filter_map(|h| h.grant.as_ref())
        .collect();
    if let Some(first) = grants.first() {
        let memory = grants
            .iter()
            .map(|g| {
                g.memory_bytes
                    .or_else(|| Some((g.memory_fraction? * total? as f64) as u64))
            })
            .sum::<Option<u64>>();
        let compute = grants
            .iter()
            .map(|g| g.compute_ratio)
            .sum::<Option<f64>>()
            .map(|c| c.min(1.0));
        return Limits {
            memory_bytes: memory,
            compute_ratio: compute,
            source: Some(first.scheduler.as_str()),
        };
    }
    let mps_mode = matches!(row.sharing_mode, SharingMode::Mps | SharingMode::MigMps);
    let plugin = row.allocations.iter().any(|h| h.claim.is_empty());
    let env = cluster
        .and_then(|c| c.pod_by_name(&row.pod.namespace, &row.pod.pod))
        .and_then(|p| p.sharing.mps_for(&row.pod.container));
    let mut limits = Limits::default();
    if mps_mode && plugin && replicas > 0 {
        limits = Limits {
            memory_bytes: total.map(|t| t / u64::from(replicas)),
            compute_ratio: Some(1.0 / f64::from(replicas)),
            source: Some("mps-device-plugin"),
        };
    }
    let dra = row
        .allocations
        .iter()
        .filter_map(|h| h.dra.as_deref())
        .find(|d| d.thread_ratio.is_some() || d.memory_bytes.is_some());
    if let Some(d) = dra.filter(|_| mps_mode) {
        limits = Limits {
            memory_bytes: d.memory_bytes,
            compute_ratio: d.thread_ratio,
            source: Some("dra-mps"),
        };
    }
    if let Some(env) = env.filter(|_| mps_mode) {
        let ordinal = ordinals.of(&row.pod, gpu_uuid, row.mig_uuid.as_deref());
        let memory = env
            .pinned_memory
            .iter()
            .find(|(o, _)| *o == Some(ordinal))
            .or_else(|| env.pinned_memory.iter().find(|(o, _)| o.is_none()))
            .map(|(_, b)| *b);
        if memory.is_some() || env.thread_ratio.is_some() {
            limits = Limits {
                memory_bytes: memory.or(limits.memory_bytes),
                compute_ratio: env.thread_ratio.or(limits.compute_ratio),
                source: Some("mps-env"),
            };
        }
    }
    limits
}

type DeviceKey = (String, Option<String>);

/// The CUDA ordinal of each of a container's devices: its devices in NVML index order, which
/// is CUDA's order under `CUDA_DEVICE_ORDER=PCI_BUS_ID` and, for one device, always right.
#[derive(Debug, Default)]
pub struct Ordinals {
    by_container: HashMap<(String, String, String), Vec<DeviceKey>>,
}

impl Ordinals {
    pub fn new(gpus: &[GpuView]) -> Self {
        let mut by_container: HashMap<(String, String, String), Vec<DeviceKey>> = HashMap::new();
        for g in gpus {
            for c in g.containers.iter().filter(|c| !c.allocations.is_empty()) {
                by_container
                    .entry((
                        c.pod.namespace.clone(),
                        c.pod.pod.clone(),
                        c.pod.container.clone(),
                    ))
                    .or_default()
                    .push((g.uuid.clone(), c.mig_uuid.clone()));
            }
        }
        Self { by_container }
    }

    fn of(&self, pod: &PodRef, gpu: &str, mig: Option<&str>) -> u32 {
        self.by_container
            .get(&(
                pod.namespace.clone(),
                pod.pod.clone(),
                pod.container.clone(),
            ))
            .and_then(|v| v.iter().position(|(g, m)| g == gpu && m.as_deref() == mig))
            .map_or(0, |p| p as u32)
    }
}

/// Fills every container's limits once the snapshot's GPUs are built.
pub fn fill_all(gpus: &mut [GpuView], cluster: Option<&ClusterView>) {
    let ordinals = Ordinals::new(gpus);
    for g in gpus {
        fill(g, cluster, &ordinals);
    }
}

#[cfg(test)]
#[path = "limits_tests.rs"]
mod tests;

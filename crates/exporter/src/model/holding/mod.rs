//! Who holds a device: a container's identity (`PodRef`, interned by `Pods`), a device in the
//! NVML sample (`Target`, found through `DeviceIndex`) and one device given to one container
//! (`Holding`). Plain data shared by attribution, the fractional schedulers' grants, DRA,
//! limits and the join.

pub mod attribution;
pub mod grants;

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use serde::Serialize;

use super::cluster::PodMeta;
use super::device_id::DeviceRef;
use super::dra_claim::DraDeviceConfig;
use super::fractional::Grant;
use super::sharing::DeclaredStrategy;
use super::GpuSample;

/// Who a process or allocation belongs to.
#[derive(Debug, Clone, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
pub struct PodRef {
    pub namespace: String,
    pub pod: String,
    pub container: String,
    pub workload_kind: String,
    pub workload: String,
    /// Allow-listed pod labels, already turned into label names (`label_<name>`).
    pub labels: Vec<(String, String)>,
}

/// A GPU (by position in the sample) or one of its MIG instances.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Target {
    pub gpu: usize,
    pub mig: Option<usize>,
}

/// One device the kubelet gave one container.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Holding {
    pub pod: Arc<PodRef>,
    pub resource: String,
    pub device_id: String,
    /// `<namespace>/<name>` of the DRA claim, empty for device-plugin allocations.
    pub claim: String,
    pub replica: bool,
    /// The fractional scheduler's grant behind this holding, with its limits.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub grant: Option<Grant>,
    /// What the DRA claim's config says about this device (strategy, MPS limits).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub dra: Option<Arc<DraDeviceConfig>>,
}

/// Every way the kubelet names a device, mapped to where it is in the NVML sample.
pub struct DeviceIndex {
    by_uuid: HashMap<String, Target>,
    by_minor: HashMap<u32, usize>,
    by_gpu_and_gi: HashMap<(usize, u32), usize>,
    by_gpu_gi_ci: HashMap<(usize, u32, u32), usize>,
}

impl DeviceIndex {
    pub fn new(gpus: &[GpuSample]) -> Self {
        let mut idx = Self {
            by_uuid: HashMap::new(),
            by_minor: HashMap::new(),
            by_gpu_and_gi: HashMap::new(),
            by_gpu_gi_ci: HashMap::new(),
        };
        for (g, gpu) in gpus.iter().enumerate() {
            idx.by_uuid
                .insert(gpu.uuid.to_ascii_lowercase(), Target { gpu: g, mig: None });
            idx.by_minor
                .insert(gpu.minor_number.unwrap_or(gpu.index), g);
            for (m, mig) in gpu.mig_instances.iter().enumerate() {
                idx.by_uuid.insert(
                    mig.uuid.to_ascii_lowercase(),
                    Target {
                        gpu: g,
                        mig: Some(m),
                    },
                );
                idx.by_gpu_and_gi.insert((g, mig.gpu_instance_id), m);
                idx.by_gpu_gi_ci
                    .insert((g, mig.gpu_instance_id, mig.compute_instance_id), m);
            }
        }
        idx
    }

    pub fn by_uuid(&self, uuid: &str) -> Option<Target> {
        self.by_uuid.get(&uuid.to_ascii_lowercase()).copied()
    }

    /// Resolves a device-plugin ID; `None` for forms that name no device on this node.
    pub fn resolve(&self, device: &DeviceRef) -> Option<Target> {
        match device {
            DeviceRef::GpuUuid(u) | DeviceRef::MigUuid(u) => self.by_uuid(u),
            DeviceRef::LegacyMig {
                gpu_uuid,
                gpu_instance,
                compute_instance,
            } => {
                let gpu = self.by_uuid(gpu_uuid)?.gpu;
                let mig = *self
                    .by_gpu_gi_ci
                    .get(&(gpu, *gpu_instance, *compute_instance))?;
                Some(Target {
                    gpu,
                    mig: Some(mig),
                })
            }
            DeviceRef::GkeIndex { index, .. } => Some(Target {
                gpu: *self.by_minor.get(index)?,
                mig: None,
            }),
            DeviceRef::GkeMig {
                index,
                gpu_instance,
                ..
            } => {
                let gpu = *self.by_minor.get(index)?;
                let mig = *self.by_gpu_and_gi.get(&(gpu, *gpu_instance))?;
                Some(Target {
                    gpu,
                    mig: Some(mig),
                })
            }
            DeviceRef::Unknown(_) => None,
        }
    }
}

/// Turns a Kubernetes label name into a Prometheus label name: `label_` + [a-zA-Z0-9_].
pub fn label_name(kube_label: &str) -> String {
    let mut out = String::with_capacity(6 + kube_label.len());
    out.push_str("label_");
    out.extend(
        kube_label
            .chars()
            .map(|c| if c.is_ascii_alphanumeric() { c } else { '_' }),
    );
    out
}

fn pod_ref(namespace: &str, pod: &str, container: &str, meta: Option<&PodMeta>) -> PodRef {
    let (workload_kind, workload) = match meta {
        Some(m) => (
            m.owner_kind.clone().unwrap_or_else(|| "Pod".into()),
            m.owner_name.clone().unwrap_or_else(|| m.name.clone()),
        ),
        None => (String::new(), String::new()),
    };
    PodRef {
        namespace: namespace.to_owned(),
        pod: pod.to_owned(),
        container: container.to_owned(),
        workload_kind,
        workload,
        labels: meta
            .map(|m| {
                m.labels
                    .iter()
                    .map(|(k, v)| (label_name(k), v.clone()))
                    .collect()
            })
            .unwrap_or_default(),
    }
}

/// Interns pod refs so every series of one container shares one allocation.
#[derive(Default)]
pub struct Pods {
    refs: BTreeMap<(String, String, String), Arc<PodRef>>,
}

impl Pods {
    pub fn get(
        &mut self,
        namespace: &str,
        pod: &str,
        container: &str,
        meta: Option<&PodMeta>,
    ) -> Arc<PodRef> {
        self.refs
            .entry((namespace.to_owned(), pod.to_owned(), container.to_owned()))
            .or_insert_with(|| Arc::new(pod_ref(namespace, pod, container, meta)))
            .clone()
    }
}

/// The strategy the DRA configs of a device's holdings declare; MPS when any says MPS.
pub fn dra_declared(holdings: &[Holding]) -> Option<DeclaredStrategy> {
    let strategies = holdings.iter().filter_map(|h| h.dra.as_ref()?.strategy);
    strategies.max_by_key(|s| matches!(s, DeclaredStrategy::Mps))
}

#[cfg(test)]
mod tests;

//! The pure join: NVML's view of the node plus (later) the kubelet's and the API server's, in;
//! the immutable snapshot the exporter shows, out.

use std::collections::BTreeMap;
use std::sync::Arc;

use serde::Serialize;

use super::sharing::{decide, SharingEvidence, SharingMode};
use super::{GpuSample, MigSample, NvmlSample, ProcessKind, ProcessSample};

/// Health of one collector, as the sampler saw it this cycle.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CollectorStatus {
    pub name: &'static str,
    pub success: bool,
    pub duration_seconds: f64,
}

/// Who a process or allocation belongs to.
#[derive(Debug, Clone, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
pub struct PodRef {
    pub namespace: String,
    pub pod: String,
    pub container: String,
    pub workload_kind: String,
    pub workload: String,
    /// Allow-listed pod labels, already sanitized into label names.
    pub labels: Vec<(String, String)>,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ProcessView {
    #[serde(flatten)]
    pub sample: ProcessSample,
    pub pod: Option<Arc<PodRef>>,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct MigView {
    #[serde(skip)]
    pub sample: MigSample,
    pub uuid: String,
    pub sharing_mode: SharingMode,
    pub evidence: SharingEvidence,
    pub why: Vec<&'static str>,
    pub sharers: u32,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct GpuView {
    #[serde(skip)]
    pub sample: GpuSample,
    pub index: u32,
    pub uuid: String,
    pub sharing_mode: SharingMode,
    pub evidence: SharingEvidence,
    pub why: Vec<&'static str>,
    pub sharers: u32,
    pub replicas: u32,
    pub mig: Vec<MigView>,
    pub processes: Vec<ProcessView>,
}

/// What the exporter shows for one sample. Immutable once built; swapped whole.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Snapshot {
    pub node: String,
    pub timestamp_seconds: f64,
    pub driver_version: String,
    pub gpus: Vec<GpuView>,
    pub collectors: Vec<CollectorStatus>,
    pub nvml_errors: BTreeMap<&'static str, u64>,
    pub sample_duration_seconds: f64,
}

pub struct JoinInputs<'a> {
    pub node: &'a str,
    pub timestamp_seconds: f64,
    pub nvml: &'a NvmlSample,
    pub collectors: Vec<CollectorStatus>,
}

fn mps_evidence(processes: &[ProcessSample]) -> (bool, usize) {
    let server = processes.iter().any(|p| p.kind == Some(ProcessKind::MpsServer));
    let clients = processes.iter().filter(|p| p.kind == Some(ProcessKind::MpsClient)).count();
    (server, clients)
}

fn mig_view(gpu: &GpuSample, mig: &MigSample) -> MigView {
    let mine: Vec<ProcessSample> = gpu
        .processes
        .iter()
        .filter(|p| p.mig_uuid.as_deref() == Some(mig.uuid.as_str()))
        .cloned()
        .collect();
    let (mps_server, mps_clients) = mps_evidence(&mine);
    let evidence = SharingEvidence {
        vgpu_guest: gpu.vgpu_guest,
        mig_instance: true,
        mps_server,
        mps_clients,
        ..Default::default()
    };
    let (sharing_mode, why) = decide(&evidence);
    MigView {
        sample: mig.clone(),
        uuid: mig.uuid.clone(),
        sharing_mode,
        evidence,
        why,
        sharers: 0,
    }
}

fn gpu_view(gpu: &GpuSample) -> GpuView {
    let (mps_server, mps_clients) = mps_evidence(&gpu.processes);
    let evidence = SharingEvidence {
        vgpu_guest: gpu.vgpu_guest,
        mig_enabled_gpu: gpu.mig_enabled == Some(true),
        mps_server,
        mps_clients,
        ..Default::default()
    };
    let (sharing_mode, why) = decide(&evidence);
    GpuView {
        index: gpu.index,
        uuid: gpu.uuid.clone(),
        sharing_mode,
        evidence,
        why,
        sharers: 0,
        replicas: 0,
        mig: gpu.mig_instances.iter().map(|m| mig_view(gpu, m)).collect(),
        processes: gpu
            .processes
            .iter()
            .map(|p| ProcessView { sample: p.clone(), pod: None })
            .collect(),
        sample: gpu.clone(),
    }
}

pub fn join(inputs: JoinInputs<'_>) -> Snapshot {
    Snapshot {
        node: inputs.node.to_owned(),
        timestamp_seconds: inputs.timestamp_seconds,
        driver_version: inputs.nvml.driver_version.clone(),
        gpus: inputs.nvml.gpus.iter().map(gpu_view).collect(),
        collectors: inputs.collectors,
        nvml_errors: inputs.nvml.errors_by_call.clone(),
        sample_duration_seconds: inputs.nvml.duration_seconds,
    }
}

//! How a GPU or MIG instance is offered to workloads. The mode describes the platform's offer,
//! not today's tenancy: a time-sliced GPU with one tenant is still `time-slicing`.

use serde::Serialize;

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum SharingMode {
    Exclusive,
    TimeSlicing,
    Mps,
    Mig,
    #[serde(rename = "mig+time-slicing")]
    MigTimeSlicing,
    #[serde(rename = "mig+mps")]
    MigMps,
    Unallocated,
    Vgpu,
    /// A fractional scheduler (HAMi, Volcano vGPU, KAI) hands out shares of the GPU.
    Fractional,
}

impl SharingMode {
    pub fn as_label(self) -> &'static str {
        match self {
            SharingMode::Exclusive => "exclusive",
            SharingMode::TimeSlicing => "time-slicing",
            SharingMode::Mps => "mps",
            SharingMode::Mig => "mig",
            SharingMode::MigTimeSlicing => "mig+time-slicing",
            SharingMode::MigMps => "mig+mps",
            SharingMode::Unallocated => "unallocated",
            SharingMode::Vgpu => "vgpu",
            SharingMode::Fractional => "fractional",
        }
    }
}

/// What the platform says about sharing, from node labels or a DRA claim's config.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum DeclaredStrategy {
    None,
    TimeSlicing,
    Mps,
}

/// Everything known about one device (a whole GPU or one MIG instance) that bears on its mode.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct SharingEvidence {
    /// NVML reports a vGPU guest.
    pub vgpu_guest: bool,
    /// GPU-level view of a GPU whose MIG mode is enabled.
    pub mig_enabled_gpu: bool,
    /// This device is a MIG instance.
    pub mig_instance: bool,
    /// An `nvidia-cuda-mps-server` process runs on the device.
    pub mps_server: bool,
    /// Processes NVML lists as MPS clients.
    pub mps_clients: usize,
    /// Containers the kubelet (or DRA) allocated this device to.
    pub holders: usize,
    /// Device IDs with a `::N` replica suffix point at this device.
    pub replica_ids: bool,
    /// Node label (`nvidia.com/gpu.sharing-strategy` or per MIG profile), or DRA claim config.
    pub declared: Option<DeclaredStrategy>,
    /// A DRA claim for this device is shared by several pods.
    pub shared_claim: bool,
    /// The fractional scheduler whose grants name this device (`hami`, `volcano-vgpu`, `kai`).
    pub fractional: Option<&'static str>,
}

/// The mode and the reasons for it, in the order they were decided (first match wins).
pub fn decide(e: &SharingEvidence) -> (SharingMode, Vec<&'static str>) {
    if e.vgpu_guest {
        return (SharingMode::Vgpu, vec!["NVML reports a vGPU guest"]);
    }
    if e.mig_enabled_gpu {
        return (SharingMode::Mig, vec!["MIG mode is enabled on the GPU"]);
    }
    if let (false, Some(scheduler)) = (e.mig_instance, e.fractional) {
        let why = match scheduler {
            "hami" => "HAMi's annotation grants containers a share of the device",
            "volcano-vgpu" => "Volcano's vGPU annotation grants containers a share of the device",
            _ => "KAI's fraction pods share the device its reservation pod holds",
        };
        return (SharingMode::Fractional, vec![why]);
    }
    let mut why = Vec::new();
    let mps = if e.mps_server || e.mps_clients > 0 {
        why.push(if e.mps_server {
            "an nvidia-cuda-mps-server process runs on the device"
        } else {
            "NVML lists MPS client processes"
        });
        true
    } else if e.declared == Some(DeclaredStrategy::Mps) {
        why.push("the node or claim declares the MPS sharing strategy");
        true
    } else {
        false
    };
    let time_sliced = !mps && {
        if e.replica_ids {
            why.push("device IDs carry a ::N replica suffix");
        }
        if e.declared == Some(DeclaredStrategy::TimeSlicing) {
            why.push("the node or claim declares the time-slicing strategy");
        }
        if e.holders > 1 {
            why.push("more than one container holds the device");
        }
        if e.shared_claim {
            why.push("a DRA claim on the device is shared by several pods");
        }
        !why.is_empty()
    };
    let mode = match (e.mig_instance, mps, time_sliced) {
        (false, true, _) => SharingMode::Mps,
        (false, false, true) => SharingMode::TimeSlicing,
        (true, true, _) => SharingMode::MigMps,
        (true, false, true) => SharingMode::MigTimeSlicing,
        (_, false, false) if e.holders == 0 => {
            why.push("no container holds the device");
            SharingMode::Unallocated
        }
        (true, false, false) => {
            why.push("one container holds the MIG instance");
            SharingMode::Mig
        }
        (false, false, false) => {
            why.push("exactly one container holds the device and nothing says it is shared");
            SharingMode::Exclusive
        }
    };
    (mode, why)
}

#[cfg(test)]
#[path = "sharing_tests.rs"]
mod tests;

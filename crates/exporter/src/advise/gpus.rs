//! The GPUs whose MIG profiles the advisor knows, keyed by the `model` label of `gpu_info`.
//!
//! Sources: H100 80GB and A100 80GB were read with `nvidia-smi mig -lgip` on the GPUs themselves
//! (/work/shared/REFERENCE.md: memory in GiB and SMs per profile, instances per GPU). The A100
//! 40GB has the A100 80GB's SM counts and instance limits; its memory per profile is the
//! profile's fraction of memory from NVIDIA's MIG user guide ("Supported MIG Profiles") applied
//! to 39.5 GiB, half the A100 80GB's 79.0 GiB, so it is derived, not read.

/// One MIG GPU-instance profile.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct MigProfile {
    pub name: &'static str,
    pub memory_gib: f64,
    pub sms: u32,
    /// How many instances of this profile fit on one GPU: a workload packed onto this profile
    /// alone costs 1/max_instances of a GPU (a 3g.40gb takes half the memory slices, so two fit,
    /// not 7/3).
    pub max_instances: u32,
}

impl MigProfile {
    /// The part of a physical GPU one instance costs.
    pub fn gpu_fraction(&self) -> f64 {
        1.0 / f64::from(self.max_instances)
    }
}

/// A GPU model the advisor can size for.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct GpuModel {
    pub name: &'static str,
    /// Memory a tenant can use on the whole GPU, in GiB (the full-size profile's, a little under
    /// the board's).
    pub memory_gib: f64,
    /// SMs of the whole GPU without MIG: SM activity is measured against these.
    pub sms: u32,
    /// Smallest first.
    pub profiles: &'static [MigProfile],
}

const fn p(name: &'static str, memory_gib: f64, sms: u32, max_instances: u32) -> MigProfile {
    MigProfile {
        name,
        memory_gib,
        sms,
        max_instances,
    }
}

pub const H100_80GB: GpuModel = GpuModel {
    name: "H100 80GB",
    memory_gib: 79.25,
    sms: 132,
    profiles: &[
        p("1g.10gb", 9.75, 16, 7),
        p("1g.20gb", 19.62, 26, 4),
        p("2g.20gb", 19.62, 32, 3),
        p("3g.40gb", 39.50, 60, 2),
        p("4g.40gb", 39.50, 64, 1),
        p("7g.80gb", 79.25, 132, 1),
    ],
};

pub const A100_80GB: GpuModel = GpuModel {
    name: "A100 80GB",
    memory_gib: 79.0,
    sms: 108,
    profiles: &[
        p("1g.10gb", 9.50, 14, 7),
        p("1g.20gb", 19.50, 14, 4),
        p("2g.20gb", 19.50, 28, 3),
        p("3g.40gb", 39.25, 42, 2),
        p("4g.40gb", 39.25, 56, 1),
        p("7g.80gb", 79.0, 98, 1),
    ],
};

pub const A100_40GB: GpuModel = GpuModel {
    name: "A100 40GB",
    memory_gib: 39.5,
    sms: 108,
    profiles: &[
        p("1g.5gb", 4.94, 14, 7),
        p("1g.10gb", 9.88, 14, 4),
        p("2g.10gb", 9.88, 28, 3),
        p("3g.20gb", 19.75, 42, 2),
        p("4g.20gb", 19.75, 56, 1),
        p("7g.40gb", 39.5, 98, 1),
    ],
};

/// The table entry for an NVML model name ("NVIDIA H100 80GB HBM3", "NVIDIA A100-SXM4-40GB",
/// "NVIDIA A100 80GB PCIe"); None for a model without a known profile table (H100 NVL 94GB,
/// H200, L4, ...), for which the advisor makes no MIG or memory-based recommendation.
pub fn lookup(model: &str) -> Option<&'static GpuModel> {
    let m = model.to_ascii_uppercase();
    if m.contains("H100") && m.contains("80GB") {
        Some(&H100_80GB)
    } else if m.contains("A100") && m.contains("80GB") {
        Some(&A100_80GB)
    } else if m.contains("A100") && m.contains("40GB") {
        Some(&A100_40GB)
    } else {
        None
    }
}

#[cfg(test)]
#[path = "gpus_tests.rs"]
mod tests;

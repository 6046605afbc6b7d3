//! Per-SKU facts the fake reports. Figures for the H100 were read on a real
//! "NVIDIA H100 80GB HBM3" (driver 580.159.04, see /work/shared/fixtures/h100);
//! the A100 figures come from NVIDIA's MIG user guide tables.

use nvml_wrapper_sys::bindings::{
    NVML_GPU_INSTANCE_PROFILE_1_SLICE as P1, NVML_GPU_INSTANCE_PROFILE_1_SLICE_REV1 as P1ME,
    NVML_GPU_INSTANCE_PROFILE_1_SLICE_REV2 as P1X2, NVML_GPU_INSTANCE_PROFILE_2_SLICE as P2,
    NVML_GPU_INSTANCE_PROFILE_3_SLICE as P3, NVML_GPU_INSTANCE_PROFILE_4_SLICE as P4,
    NVML_GPU_INSTANCE_PROFILE_7_SLICE as P7,
};

/// One GPU instance profile as `nvmlDeviceGetGpuInstanceProfileInfo` describes it.
#[derive(Debug)]
pub struct MigProfile {
    /// `nvidia-smi` name without the "MIG " prefix, e.g. "1g.10gb".
    pub name: &'static str,
    /// `NVML_GPU_INSTANCE_PROFILE_*` index that callers pass in.
    pub index: u32,
    /// Profile id printed by `nvidia-smi mig -lgip` (19 for 1g.10gb ...).
    pub id: u32,
    /// Compute slices (the "1" in 1g).
    pub slices: u32,
    /// Memory slices out of 8; decides placement and overlap.
    pub memory_slices: u32,
    pub instance_count: u32,
    pub sms: u32,
    pub memory_mib: u64,
    pub copy_engines: u32,
    pub decoders: u32,
    pub encoders: u32,
    pub jpegs: u32,
    pub ofas: u32,
    /// Allowed start positions (in memory slices), as `nvidia-smi mig -lgipp` lists them.
    pub placements: &'static [u32],
}

#[derive(Debug)]
pub struct Sku {
    pub key: &'static str,
    pub name: &'static str,
    pub memory_total_mib: u64,
    pub memory_reserved_mib: u64,
    pub power_limit_w: u32,
    pub idle_power_w: f64,
    pub idle_temp_c: f64,
    pub sms: u32,
    pub gpm: bool,
    pub pci_device_id: u32,
    pub pci_subsystem_id: u32,
    pub sm_clock_max_mhz: u32,
    pub sm_clock_idle_mhz: u32,
    pub mem_clock_mhz: u32,
    pub video_clock_idle_mhz: u32,
    pub video_clock_max_mhz: u32,
    pub mig_profiles: &'static [MigProfile],
    /// Power of the rest of a superchip module (the Grace CPU, its LPDDR5X, the C2C link) that
    /// the module-scoped energy counter counts and the GPU's power reading leaves out; 0 for a
    /// discrete GPU, whose counter and power reading have the same scope.
    pub module_other_power_w: f64,
}

impl Sku {
    pub fn profile_by_name(&self, name: &str) -> Option<&'static MigProfile> {
        self.mig_profiles.iter().find(|p| p.name == name)
    }

    pub fn profile_by_index(&self, index: u32) -> Option<&'static MigProfile> {
        self.mig_profiles.iter().find(|p| p.index == index)
    }
}

const ANY_1: &[u32] = &[0, 1, 2, 3, 4, 5, 6];
const EVEN_4: &[u32] = &[0, 2, 4, 6];
const EVEN_3: &[u32] = &[0, 2, 4];
const HALVES: &[u32] = &[0, 4];
const START: &[u32] = &[0];

// Engine counts per profile differ between Hopper and Ampere; the table keeps
// them so `nvmlDeviceGetAttributes_v2` on a MIG handle looks like the real one.
#[allow(clippy::too_many_arguments)]
const fn profile(
    name: &'static str,
    index: u32,
    id: u32,
    slices: u32,
    memory_slices: u32,
    instance_count: u32,
    sms: u32,
    memory_mib: u64,
    engines: [u32; 5],
    placements: &'static [u32],
) -> MigProfile {
    MigProfile {
        name,
        index,
        id,
        slices,
        memory_slices,
        instance_count,
        sms,
        memory_mib,
        copy_engines: engines[0],
        decoders: engines[1],
        encoders: engines[2],
        jpegs: engines[3],
        ofas: engines[4],
        placements,
    }
}

// engines: [copy engines, decoders, encoders, jpeg, ofa]
static H100_PROFILES: [MigProfile; 7] = [
    profile("1g.10gb", P1, 19, 1, 1, 7, 16, 9984, [1, 1, 0, 1, 0], ANY_1),
    profile(
        "1g.10gb+me",
        P1ME,
        20,
        1,
        1,
        1,
        16,
        9984,
        [1, 1, 0, 1, 1],
        ANY_1,
    ),
    profile(
        "1g.20gb",
        P1X2,
        15,
        1,
        2,
        4,
        26,
        20096,
        [1, 1, 0, 1, 0],
        EVEN_4,
    ),
    profile(
        "2g.20gb",
        P2,
        14,
        2,
        2,
        3,
        32,
        20096,
        [2, 2, 0, 2, 0],
        EVEN_3,
    ),
    profile(
        "3g.40gb",
        P3,
        9,
        3,
        4,
        2,
        60,
        40448,
        [3, 3, 0, 3, 0],
        HALVES,
    ),
    profile("4g.40gb", P4, 5, 4, 4, 1, 64, 40448, [4, 4, 0, 4, 0], START),
    profile(
        "7g.80gb",
        P7,
        0,
        7,
        8,
        1,
        132,
        81152,
        [8, 7, 0, 7, 1],
        START,
    ),
];

static A100_80_PROFILES: [MigProfile; 7] = [
    profile("1g.10gb", P1, 19, 1, 1, 7, 14, 9728, [1, 0, 0, 0, 0], ANY_1),
    profile(
        "1g.10gb+me",
        P1ME,
        20,
        1,
        1,
        1,
        14,
        9728,
        [1, 1, 0, 1, 1],
        ANY_1,
    ),
    profile(
        "1g.20gb",
        P1X2,
        15,
        1,
        2,
        4,
        14,
        19968,
        [1, 1, 0, 0, 0],
        EVEN_4,
    ),
    profile(
        "2g.20gb",
        P2,
        14,
        2,
        2,
        3,
        28,
        19968,
        [2, 1, 0, 0, 0],
        EVEN_3,
    ),
    profile(
        "3g.40gb",
        P3,
        9,
        3,
        4,
        2,
        42,
        40192,
        [3, 2, 0, 0, 0],
        HALVES,
    ),
    profile("4g.40gb", P4, 5, 4, 4, 1, 56, 40192, [4, 2, 0, 0, 0], START),
    profile("7g.80gb", P7, 0, 7, 8, 1, 98, 80896, [7, 5, 0, 1, 1], START),
];

static A100_40_PROFILES: [MigProfile; 7] = [
    profile("1g.5gb", P1, 19, 1, 1, 7, 14, 4864, [1, 0, 0, 0, 0], ANY_1),
    profile(
        "1g.5gb+me",
        P1ME,
        20,
        1,
        1,
        1,
        14,
        4864,
        [1, 1, 0, 1, 1],
        ANY_1,
    ),
    profile(
        "1g.10gb",
        P1X2,
        15,
        1,
        2,
        4,
        14,
        9856,
        [1, 1, 0, 0, 0],
        EVEN_4,
    ),
    profile(
        "2g.10gb",
        P2,
        14,
        2,
        2,
        3,
        28,
        9856,
        [2, 1, 0, 0, 0],
        EVEN_3,
    ),
    profile(
        "3g.20gb",
        P3,
        9,
        3,
        4,
        2,
        42,
        19968,
        [3, 2, 0, 0, 0],
        HALVES,
    ),
    profile("4g.20gb", P4, 5, 4, 4, 1, 56, 19968, [4, 2, 0, 0, 0], START),
    profile("7g.40gb", P7, 0, 7, 8, 1, 98, 40192, [7, 5, 0, 1, 1], START),
];

pub static SKUS: [Sku; 4] = [
    Sku {
        key: "h100-80gb-hbm3",
        name: "NVIDIA H100 80GB HBM3",
        memory_total_mib: 81559,
        memory_reserved_mib: 480,
        power_limit_w: 700,
        idle_power_w: 74.0,
        idle_temp_c: 40.0,
        sms: 132,
        gpm: true,
        pci_device_id: 0x2330_10DE,
        pci_subsystem_id: 0x16C1_10DE,
        sm_clock_max_mhz: 1980,
        sm_clock_idle_mhz: 345,
        mem_clock_mhz: 2619,
        video_clock_idle_mhz: 765,
        video_clock_max_mhz: 1545,
        mig_profiles: &H100_PROFILES,
        module_other_power_w: 0.0,
    },
    Sku {
        key: "a100-sxm4-80gb",
        name: "NVIDIA A100-SXM4-80GB",
        memory_total_mib: 81920,
        memory_reserved_mib: 512,
        power_limit_w: 400,
        idle_power_w: 62.0,
        idle_temp_c: 32.0,
        sms: 108,
        gpm: false,
        pci_device_id: 0x20B2_10DE,
        pci_subsystem_id: 0x147F_10DE,
        sm_clock_max_mhz: 1410,
        sm_clock_idle_mhz: 210,
        mem_clock_mhz: 1593,
        video_clock_idle_mhz: 585,
        video_clock_max_mhz: 1290,
        mig_profiles: &A100_80_PROFILES,
        module_other_power_w: 0.0,
    },
    Sku {
        key: "a100-sxm4-40gb",
        name: "NVIDIA A100-SXM4-40GB",
        memory_total_mib: 40960,
        memory_reserved_mib: 512,
        power_limit_w: 400,
        idle_power_w: 55.0,
        idle_temp_c: 31.0,
        sms: 108,
        gpm: false,
        pci_device_id: 0x20B0_10DE,
        pci_subsystem_id: 0x134F_10DE,
        sm_clock_max_mhz: 1410,
        sm_clock_idle_mhz: 210,
        mem_clock_mhz: 1215,
        video_clock_idle_mhz: 585,
        video_clock_max_mhz: 1290,
        mig_profiles: &A100_40_PROFILES,
        module_other_power_w: 0.0,
    },
    // A Grace Hopper module as NVML shows its GPU: the H100 with 96 GB of HBM3 (MIG user guide,
    // "H100 on GH200", 7 instances). What differs for tessera is the energy counter's scope:
    // nvmlDeviceGetTotalEnergyConsumption counts the whole module, CPU and memory included,
    // while nvmlDeviceGetPowerUsage reads the GPU (docs/compatibility.md). The PCI device id is
    // GH100's for GH200 in the PCI ID database; the other figures are stand-ins, not readings of
    // a GH200 (none was lent), and MIG is not modelled on it.
    Sku {
        key: "gh200-96gb-hbm3",
        name: "NVIDIA GH200 480GB",
        memory_total_mib: 97871,
        memory_reserved_mib: 480,
        power_limit_w: 900,
        idle_power_w: 90.0,
        idle_temp_c: 36.0,
        sms: 132,
        gpm: true,
        pci_device_id: 0x2342_10DE,
        pci_subsystem_id: 0x16EB_10DE,
        sm_clock_max_mhz: 1980,
        sm_clock_idle_mhz: 345,
        mem_clock_mhz: 2619,
        video_clock_idle_mhz: 765,
        video_clock_max_mhz: 1545,
        mig_profiles: &[],
        module_other_power_w: 120.0,
    },
];

pub fn by_key(key: &str) -> Option<&'static Sku> {
    SKUS.iter().find(|s| s.key == key)
}

pub fn keys() -> Vec<&'static str> {
    SKUS.iter().map(|s| s.key).collect()
}

/// GPU instance id NVML would hand out for an instance at this placement.
/// Real drivers derive the id from the placement slot, so the same layout
/// always gets the same ids; the exact numbers here are a stable stand-in.
pub fn default_gpu_instance_id(profile: &MigProfile, start: u32) -> u32 {
    match profile.memory_slices {
        8 => 0,
        4 => 1 + start / 4,
        2 => 3 + start / 2,
        _ => 7 + start,
    }
}

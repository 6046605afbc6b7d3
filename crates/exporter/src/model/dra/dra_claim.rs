//! What a DRA ResourceClaim says, as plain data: its allocated devices, the NVIDIA driver's
//! configs and what they make of each device, and the devices ResourceSlices publish. Parsed
//! by `dra_parse`, resolved by `dra`, held by the cluster view and by holdings.

use serde::Serialize;

use crate::model::sharing::DeclaredStrategy;

/// One ResourceClaim as far as tessera reads it: its allocated devices and its configs.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DraClaim {
    pub namespace: String,
    pub name: String,
    pub results: Vec<ClaimResult>,
    /// The driver's precedence order, lowest first: class configs, then the claim's own.
    pub configs: Vec<ClaimConfig>,
    /// What was left out of the claim, and why.
    pub notes: Vec<String>,
}

/// `status.allocation.devices.results[]`: one device allocated for one request.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ClaimResult {
    pub request: String,
    pub driver: String,
    pub pool: String,
    pub device: String,
}

/// One opaque config of the NVIDIA driver in `status.allocation.devices.config[]`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClaimConfig {
    /// Request names it applies to; empty applies to every request whose device type fits.
    pub requests: Vec<String>,
    pub kind: ConfigKind,
    /// `Ok(None)`: no sharing set; `Err`: why the config could not be read.
    pub sharing: Result<Option<SharingConfig>, String>,
}

/// The config's `kind`, which decides the device types it may govern.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ConfigKind {
    Gpu,
    MigDevice,
    Vfio,
    /// Unreadable: it may govern any device.
    Unknown,
}

impl ConfigKind {
    pub(super) fn name(self) -> &'static str {
        match self {
            Self::Gpu => "GpuConfig",
            Self::MigDevice => "MigDeviceConfig",
            Self::Vfio => "VfioDeviceConfig",
            Self::Unknown => "config",
        }
    }

    /// The ResourceSlice `type` attribute of the devices this kind may govern.
    pub(super) fn fits(self, device_type: &str) -> bool {
        match self {
            Self::Gpu => device_type == "gpu",
            Self::MigDevice => device_type == "mig",
            Self::Vfio => device_type == "vfio",
            Self::Unknown => true,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SharingConfig {
    TimeSlicing { interval: Option<String> },
    Mps(MpsConfig),
}

/// `sharing.mpsConfig`, checked the way the driver checks it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct MpsConfig {
    /// `defaultActiveThreadPercentage`, 0..=100.
    pub thread_percentage: Option<u8>,
    /// `defaultPinnedDeviceMemoryLimit`, in whole MiB as MPS receives it.
    pub default_pinned_bytes: Option<u64>,
    /// `defaultPerDevicePinnedMemoryLimit`: device UUID or index within the config's devices.
    pub per_device_pinned: Vec<(String, u64)>,
    /// Fields this version does not know, skipped.
    pub ignored: Vec<String>,
}

/// What a claim's config says about one allocated device; shown per holding in
/// `/debug/attribution`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct DraDeviceConfig {
    /// `<namespace>/<name>` of the claim.
    pub claim: String,
    pub request: String,
    /// Which config governs the device, e.g. `DRA GpuConfig MPS`.
    pub config: String,
    /// `None` when the governing config could not be read.
    pub strategy: Option<DeclaredStrategy>,
    /// MPS: each client's share of the SMs (active thread percentage / 100).
    pub thread_ratio: Option<f64>,
    /// MPS: each client's pinned device memory limit.
    pub memory_bytes: Option<u64>,
    pub notes: Vec<String>,
}

// thread_ratio is a percentage in 0..=100 divided by 100, never NaN.
impl Eq for DraDeviceConfig {}

/// `(driver, pool, device)` of an allocated device.
pub type DeviceKey = (String, String, String);

/// One device published in a ResourceSlice.
#[derive(Debug, Clone, PartialEq, Eq, Default, PartialOrd, Ord)]
pub struct DraDevice {
    pub driver: String,
    pub pool: String,
    pub device: String,
    pub uuid: Option<String>,
    pub parent_uuid: Option<String>,
    pub profile: Option<String>,
    /// The driver's `type` attribute (`gpu`, `mig`, …).
    pub kind: Option<String>,
}

//! What the kubelet's pod-resources API says each container was given, as plain data. The
//! pod-resources source converts its protobuf answers into these; the join reads them.

/// One `List` answer (plus the allocatable devices learnt after the last connect).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Allocations {
    pub containers: Vec<ContainerAllocation>,
    pub allocatable: Vec<AllocatableDevice>,
    /// Entries left out because they broke a cap (`MAX_*`).
    pub skipped: usize,
}

/// Devices the kubelet handed to one container.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ContainerAllocation {
    pub namespace: String,
    pub pod: String,
    pub container: String,
    /// Device-plugin allocations, one entry per resource name.
    pub devices: Vec<ResourceDevices>,
    /// DRA allocations, one entry per allocated device of each claim.
    pub dynamic: Vec<DynamicDevice>,
}

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ResourceDevices {
    pub resource_name: String,
    /// As the device plugin reported them: `GPU-<uuid>`, `<id>::<n>`, `MIG-...`, `nvidiaN/vgpuK`.
    pub device_ids: Vec<String>,
}

/// A DRA device; (driver, pool, device) is resolved to a UUID through ResourceSlices elsewhere.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DynamicDevice {
    pub claim_name: String,
    pub claim_namespace: String,
    pub driver: String,
    pub pool: String,
    pub device: String,
    /// Set when the device is one share of a multi-allocatable device (Kubernetes 1.35+).
    pub share_id: Option<String>,
}

/// One device the kubelet can hand out for a resource (`GetAllocatableResources`).
#[derive(Debug, Clone, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct AllocatableDevice {
    pub resource_name: String,
    pub device_id: String,
}

/// The converted `GetAllocatableResources` answer.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Allocatable {
    pub devices: Vec<AllocatableDevice>,
    pub skipped: usize,
}

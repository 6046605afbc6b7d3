//! The one metric table: every family tessera exposes, its type, labels and help. The encoder
//! refuses names that are not here, and docs/metrics.md is generated from it.

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Gauge,
    /// Exposed with `_total` appended by the OpenMetrics encoder.
    Counter,
}

#[derive(Debug, Clone, Copy)]
pub struct Family {
    /// Position in [`ALL`], so the encoder files a series without hashing the name.
    pub index: usize,
    pub name: &'static str,
    pub kind: Kind,
    pub labels: &'static [&'static str],
    /// The exposition's HELP: one sentence of at most [`HELP_MAX`] characters.
    pub help: &'static str,
    /// How the value is computed and when it is absent, for docs/metrics.md; empty where the
    /// HELP says it all.
    pub doc: &'static str,
}

/// The longest HELP a family may have: what a person reads in `curl /metrics`, Prometheus'
/// metric explorer and Grafana's query builder, where the full meaning would not fit.
pub const HELP_MAX: usize = 150;

pub mod label {
    pub const NODE: &str = "node";
    pub const GPU: &str = "gpu";
    pub const UUID: &str = "uuid";
    pub const SHARING_MODE: &str = "sharing_mode";
    pub const MODEL: &str = "model";
    pub const DRIVER_VERSION: &str = "driver_version";
    pub const PCI_BUS_ID: &str = "pci_bus_id";
    pub const MIG_MODE: &str = "mig_mode";
    pub const COMPUTE_MODE: &str = "compute_mode";
    pub const SENSOR: &str = "sensor";
    pub const CLOCK: &str = "clock";
    pub const REASON: &str = "reason";
    pub const TYPE: &str = "type";
    pub const XID: &str = "xid";
    pub const MIG_UUID: &str = "mig_uuid";
    pub const GPU_INSTANCE_ID: &str = "gpu_instance_id";
    pub const COMPUTE_INSTANCE_ID: &str = "compute_instance_id";
    pub const PROFILE: &str = "profile";
    pub const SLICES: &str = "slices";
    pub const NAMESPACE: &str = "namespace";
    pub const POD: &str = "pod";
    pub const CONTAINER: &str = "container";
    pub const WORKLOAD_KIND: &str = "workload_kind";
    pub const WORKLOAD: &str = "workload";
    pub const RESOURCE: &str = "resource";
    pub const DEVICE_ID: &str = "device_id";
    pub const CLAIM: &str = "claim";
    pub const KIND: &str = "kind";
    pub const PID: &str = "pid";
    pub const PROCESS: &str = "process";
    pub const COLLECTOR: &str = "collector";
    pub const CALL: &str = "call";
    pub const WORKER: &str = "worker";
    pub const VERSION: &str = "version";
    pub const REVISION: &str = "revision";
    pub const METHOD: &str = "method";
    pub const REASON_DISPUTE: &str = "reason";
    pub const ACTIVITY: &str = "activity";
}

use label::*;

const GPU_LABELS: &[&str] = &[NODE, GPU, UUID, SHARING_MODE];
const MIG_LABELS: &[&str] = &[
    NODE,
    GPU,
    UUID,
    SHARING_MODE,
    MIG_UUID,
    GPU_INSTANCE_ID,
    PROFILE,
];
/// Allow-listed pod labels follow these as `label_<name>`.
const CONTAINER_LABELS: &[&str] = &[
    NODE,
    GPU,
    UUID,
    SHARING_MODE,
    MIG_UUID,
    NAMESPACE,
    POD,
    CONTAINER,
    WORKLOAD_KIND,
    WORKLOAD,
];
const CONTAINER_ALLOCATION_LABELS: &[&str] = &[
    NODE,
    GPU,
    UUID,
    SHARING_MODE,
    MIG_UUID,
    NAMESPACE,
    POD,
    CONTAINER,
    WORKLOAD_KIND,
    WORKLOAD,
    RESOURCE,
    DEVICE_ID,
    CLAIM,
];
/// Allow-listed pod labels follow these as `label_<name>`.
const CONTAINER_ENERGY_LABELS: &[&str] = &[
    NODE,
    GPU,
    UUID,
    SHARING_MODE,
    MIG_UUID,
    NAMESPACE,
    POD,
    CONTAINER,
    WORKLOAD_KIND,
    WORKLOAD,
    ACTIVITY,
];
const DEVICE_LABELS: &[&str] = &[NODE, GPU, UUID, SHARING_MODE, MIG_UUID];
const POD_LABELS: &[&str] = &[
    NODE,
    GPU,
    UUID,
    SHARING_MODE,
    MIG_UUID,
    NAMESPACE,
    POD,
    WORKLOAD_KIND,
    WORKLOAD,
];
const POD_METHOD_LABELS: &[&str] = &[
    NODE,
    GPU,
    UUID,
    SHARING_MODE,
    MIG_UUID,
    NAMESPACE,
    POD,
    WORKLOAD_KIND,
    WORKLOAD,
    METHOD,
];
const PROCESS_LABELS: &[&str] = &[
    NODE,
    GPU,
    UUID,
    SHARING_MODE,
    MIG_UUID,
    PID,
    PROCESS,
    TYPE,
    NAMESPACE,
    POD,
    CONTAINER,
];

macro_rules! doc_or_nothing {
    () => {
        ""
    };
    ($doc:literal) => {
        $doc
    };
}

macro_rules! families {
    ($($ident:ident = $name:literal, $kind:ident, $labels:expr, $help:literal $(, doc = $doc:literal)?;)*) => {
        #[allow(non_camel_case_types, clippy::upper_case_acronyms)]
        enum Position { $($ident),* }
        $(pub const $ident: Family = Family {
            index: Position::$ident as usize,
            name: $name,
            kind: Kind::$kind,
            labels: $labels,
            help: $help,
            doc: doc_or_nothing!($($doc)?),
        };)*
        pub const ALL: &[Family] = &[$($ident),*];
    };
}

// Label lists are spelled out per family so the table reads as documentation.
families! {
    GPU_INFO = "gpu_info", Gauge,
        &[NODE, GPU, UUID, SHARING_MODE, MODEL, DRIVER_VERSION, PCI_BUS_ID, MIG_MODE, COMPUTE_MODE],
        "Static facts about the GPU; value 1.";
    GPU_UP = "gpu_up", Gauge, GPU_LABELS,
        "1 while NVML answers for the GPU; 0 when it is lost or failing.";
    GPU_DOWN_REASON = "gpu_down_reason", Gauge, &[NODE, GPU, UUID, SHARING_MODE, REASON],
        "Present, at 1, while the GPU is down for a reason tessera knows (NVML worker died, \
         restarting, timed out, or no handle).",
        doc = "Present, at 1, while the GPU is down for a reason tessera knows: nvml_worker_died \
             (the NVML worker process sampling it died; a new one is starting), \
             nvml_worker_starting (restarting with backoff after repeated deaths), nvml_timeout \
             (its NVML calls missed --nvml.timeout) or nvml_no_handle (NVML counts the GPU but \
             gives no handle to it, as for a GPU lost before tessera started: its uuid is \
             unknown, and the handle is asked for again every 10 s).";
    GPU_MEMORY_TOTAL = "gpu_memory_total_bytes", Gauge, GPU_LABELS,
        "Framebuffer memory installed.";
    GPU_MEMORY_USED = "gpu_memory_used_bytes", Gauge, GPU_LABELS,
        "Framebuffer memory allocated.";
    GPU_MEMORY_RESERVED = "gpu_memory_reserved_bytes", Gauge, GPU_LABELS,
        "Framebuffer memory reserved by the driver.";
    GPU_UTILIZATION = "gpu_utilization_ratio", Gauge, GPU_LABELS,
        "Fraction of the time a kernel ran, NVML's coarse device figure; absent on MIG GPUs.",
        doc = "Fraction of the time a kernel ran (NVML's coarse figure; absent on MIG GPUs): the \
             mean of the driver's samples since the previous read, read every sample where a \
             process holds the GPU or it was busy, else every 5 s, the last window standing in \
             between.";
    GPU_MEMORY_UTILIZATION = "gpu_memory_utilization_ratio", Gauge, GPU_LABELS,
        "Fraction of the time device memory was read or written: the mean of the driver's samples \
         over the last 5 s window.";
    GPU_SM_ACTIVITY = "gpu_sm_activity_ratio", Gauge, GPU_LABELS,
        "GPM: fraction of time SMs had at least one warp assigned (Hopper and later).";
    GPU_SM_OCCUPANCY = "gpu_sm_occupancy_ratio", Gauge, GPU_LABELS,
        "GPM: resident warps over the theoretical maximum, averaged over SMs.";
    GPU_TENSOR_ACTIVITY = "gpu_tensor_activity_ratio", Gauge, GPU_LABELS,
        "GPM: fraction of time tensor cores were busy.";
    GPU_DRAM_BANDWIDTH = "gpu_dram_bandwidth_utilization_ratio", Gauge, GPU_LABELS,
        "GPM: fraction of peak DRAM bandwidth used.";
    GPU_GPM_AVAILABLE = "gpu_gpm_available", Gauge, &[NODE, GPU, UUID, SHARING_MODE, REASON],
        "1 when GPM answered this sample, 0 with the reason when it did not; the GPM families are \
         then absent.",
        doc = "1 when GPM (the source of the SM, tensor and DRAM activity families) answered this \
             sample; 0 with the reason when it did not: not_supported (before Hopper, or a vGPU), \
             or the NVML error of the sample or metric call (e.g. in_use, no_permission). The GPM \
             families are then absent, never 0; they cover the window since the previous GPM \
             sample: a sample period, or 5 s on a GPU with no process whose last window was idle. \
             (Nsight Compute profiling did not make GPM fail on an H100: docs/validation.md.)";
    GPU_POWER = "gpu_power_watts", Gauge, GPU_LABELS,
        "Power draw.";
    GPU_POWER_LIMIT = "gpu_power_limit_watts", Gauge, GPU_LABELS,
        "Enforced power limit.";
    GPU_POWER_FLOOR = "gpu_power_floor_watts", Gauge, GPU_LABELS,
        "The idle power floor this sample's energy split used; absent until learned.",
        doc = "The idle floor this sample's energy split used: the GPU's power with nothing \
             running, the lowest median of its power over --energy.floor-window of idle readings \
             at the clock state it settles idle in (a GPU never seen idle takes the median of its \
             same-model siblings'). Absent until learned; meanwhile energy the split would need \
             it for goes to gpu_energy_unattributed_joules_total{reason=\"floor-unknown\"} \
             (docs/energy.md).";
    GPU_ENERGY = "gpu_energy_joules", Counter, GPU_LABELS,
        "Energy consumed since the driver loaded (read on the slow cadence).";
    GPU_ENERGY_UNATTRIBUTED = "gpu_energy_unattributed_joules", Counter,
        &[NODE, GPU, UUID, SHARING_MODE, REASON],
        "Energy of the GPU charged to no container since tessera started, by reason.",
        doc = "Energy of the GPU charged to no container since tessera started, by reason: \
             unallocated (nobody holds the device, instance or slices), floor-unknown (the split \
             needs the idle floor, not learned yet), withheld / disputed / sole-active-pod / \
             bounds-only (the compute split withheld the share, for that reason: its dynamic \
             energy is withheld too), unattributed (activity of processes outside any known \
             container), unsampled (time without a power reading or sample), departed (a \
             container that left before the counter was next read). With \
             gpu_container_energy_joules_total summed over the GPU's containers it adds up to \
             gpu_energy_joules_total's increase.";
    GPU_TEMPERATURE = "gpu_temperature_celsius", Gauge, &[NODE, GPU, UUID, SHARING_MODE, SENSOR],
        "Temperature by sensor.";
    GPU_CLOCK = "gpu_clock_hertz", Gauge, &[NODE, GPU, UUID, SHARING_MODE, CLOCK],
        "Current clock by domain.";
    GPU_CLOCK_EVENT_REASONS = "gpu_clock_event_reasons_active", Gauge,
        &[NODE, GPU, UUID, SHARING_MODE, REASON],
        "1 when the reason is currently holding clocks down (throttling).";
    GPU_ECC_ERRORS = "gpu_ecc_errors", Counter, &[NODE, GPU, UUID, SHARING_MODE, TYPE],
        "ECC errors since the driver loaded, corrected or uncorrected.";
    GPU_XID_ERRORS = "gpu_xid_errors", Counter, &[NODE, GPU, UUID, SHARING_MODE, XID],
        "XID errors seen since tessera started, by XID.";
    GPU_ENCODER_UTILIZATION = "gpu_encoder_utilization_ratio", Gauge, GPU_LABELS,
        "Fraction of NVML's sample period in which the video encoder was busy.";
    GPU_DECODER_UTILIZATION = "gpu_decoder_utilization_ratio", Gauge, GPU_LABELS,
        "Fraction of NVML's sample period in which the video decoders were busy.";
    GPU_REMAPPED_ROWS = "gpu_remapped_rows", Counter, &[NODE, GPU, UUID, SHARING_MODE, TYPE],
        "HBM rows remapped to spares (persistent across reboots), for correctable or uncorrectable \
         errors (read on the slow cadence).";
    GPU_ROW_REMAP_PENDING = "gpu_row_remap_pending", Gauge, GPU_LABELS,
        "1 when a row remapping waits for the next GPU reset.";
    GPU_ROW_REMAP_FAILURE = "gpu_row_remap_failure", Gauge, GPU_LABELS,
        "1 when a row remapping failed: the GPU should be taken out of service.";
    GPU_PCIE_REPLAYS = "gpu_pcie_replays", Counter, GPU_LABELS,
        "PCIe replays since the driver loaded.";
    GPU_MIG_SLICES = "gpu_mig_slices", Gauge, GPU_LABELS,
        "Compute slices a MIG-enabled GPU offers.";
    GPU_MIG_SLICES_USED = "gpu_mig_slices_used", Gauge, GPU_LABELS,
        "Compute slices taken by MIG instances; the rest is unpartitioned.";
    GPU_MIG_INSTANCE_INFO = "gpu_mig_instance_info", Gauge,
        &[NODE, GPU, UUID, SHARING_MODE, MIG_UUID, GPU_INSTANCE_ID, PROFILE, COMPUTE_INSTANCE_ID, SLICES],
        "A MIG instance; value 1.";
    GPU_MIG_MEMORY_TOTAL = "gpu_mig_instance_memory_total_bytes", Gauge, MIG_LABELS,
        "Memory of the MIG instance.";
    GPU_MIG_MEMORY_USED = "gpu_mig_instance_memory_used_bytes", Gauge, MIG_LABELS,
        "Memory allocated in the MIG instance.";
    GPU_MIG_SM_ACTIVITY = "gpu_mig_instance_sm_activity_ratio", Gauge, MIG_LABELS,
        "GPM: SM activity of the GPU instance.";
    GPU_MIG_SM_OCCUPANCY = "gpu_mig_instance_sm_occupancy_ratio", Gauge, MIG_LABELS,
        "GPM: SM occupancy of the GPU instance.";
    GPU_MIG_TENSOR_ACTIVITY = "gpu_mig_instance_tensor_activity_ratio", Gauge, MIG_LABELS,
        "GPM: tensor activity of the GPU instance.";
    GPU_MIG_DRAM_BANDWIDTH = "gpu_mig_instance_dram_bandwidth_utilization_ratio", Gauge, MIG_LABELS,
        "GPM: DRAM bandwidth utilization of the GPU instance.";
    GPU_MIG_SHARERS = "gpu_mig_instance_sharers", Gauge, MIG_LABELS,
        "Containers holding the MIG instance now.";
    GPU_MIG_REPLICAS = "gpu_mig_instance_replicas", Gauge, MIG_LABELS,
        "Containers the MIG instance is offered to.";
    GPU_MIG_UNATTRIBUTED = "gpu_mig_instance_unattributed_sm_activity_ratio", Gauge, MIG_LABELS,
        "GPM SM activity of the instance given to no container: several holders were active and \
         nothing could split it, or processes ran outside any pod.";
    GPU_MIG_COMPUTE_SPLIT = "gpu_mig_instance_compute_split_info", Gauge,
        &[NODE, GPU, UUID, SHARING_MODE, MIG_UUID, GPU_INSTANCE_ID, PROFILE, METHOD],
        "How the MIG instance's activity was split among containers this sample, by method; value \
         1.",
        doc = "How the instance's activity was split among containers this sample (idle, \
             mig-instance, probe, sole-active-container, sole-active-pod, disputed, withheld); \
             value 1.";
    GPU_SHARERS = "gpu_sharers", Gauge, GPU_LABELS,
        "Containers holding the GPU now.";
    GPU_REPLICAS = "gpu_replicas", Gauge, GPU_LABELS,
        "Containers the GPU is offered to (1 when exclusive, 0 when not offered).";
    GPU_PROCESSES = "gpu_processes", Gauge, GPU_LABELS,
        "Processes running on the GPU.";
    GPU_UNATTRIBUTED = "gpu_unattributed_utilization_ratio", Gauge, GPU_LABELS,
        "Utilization the GPU measured but gave to no container (withheld, or used outside any \
         pod).",
        doc = "Utilization the GPU measured but gave to no container: withheld because several \
             processes ran kernels and NVML cannot split them (time-slicing, MPS), or used by \
             processes outside any pod.";
    GPU_ACTIVE_CONTAINERS = "gpu_active_containers", Gauge, GPU_LABELS,
        "Containers with a process that may run kernels on the GPU this sample.",
        doc = "Containers with a process that may run kernels on the GPU this sample: NVML or the \
             CUDA probe saw its kernels, or it used CPU over --activity.window (a process without \
             a known pod counts as one). What keeps tessera from calling a tenant idle.";
    GPU_COMPUTE_SPLIT = "gpu_compute_split_info", Gauge, &[NODE, GPU, UUID, SHARING_MODE, METHOD],
        "How the GPU's utilization was split among containers this sample, by method; value 1.",
        doc = "How the GPU's utilization was split among containers this sample: idle, \
             sole-active-process (NVML's figure is the one active process's), \
             sole-active-container / sole-active-pod (every process that may run kernels is of \
             one container / pod: the GPU's figure is its, process shares withheld), probe (CUDA \
             probe busy time; where lone milliseconds ran stretched past the solo estimates' \
             tolerance but short of a hidden tenant's mark, point figures are withheld and only \
             gpu_container_busy_ratio_lower / _upper published), by-difference (the one unprobed \
             container gets the GPU's busy time less the probed tenants' own), disputed (the \
             probes' claims contradict the GPU's busy time, NVML's bookings, CPU time or the \
             shared clock: withheld, nobody charged), withheld (absent per-container shares); \
             value 1.";
    GPU_COMPUTE_DISPUTED = "gpu_compute_split_disputed", Counter,
        &[NODE, GPU, UUID, SHARING_MODE, MIG_UUID, REASON_DISPUTE],
        "Samples whose probe-decided split was contradicted by evidence the tenants do not \
         control, by reason; the split was withheld.",
        doc = "Samples whose split the CUDA probes' claims would have decided but evidence the \
             tenants do not control contradicted them, by reason: under-claimed, over-claimed, \
             nvml-booked, claim-without-cpu, claims-nothing, stretched-alone, totals-only, \
             solo-excess, probe-silent, clock (docs/security.md, Billing). The split was \
             withheld.";
    GPU_COMPUTE_BUSY = "gpu_compute_busy_seconds", Counter, DEVICE_LABELS,
        "Device-seconds the GPU or MIG instance measured busy; what the attributed seconds are a \
         share of.",
        doc = "Device-seconds the GPU (or MIG instance, mig_uuid set: its GPM SM activity) \
             measured busy: its utilization integrated over samples. What the attributed seconds \
             are a share of.";
    GPU_COMPUTE_ATTRIBUTED = "gpu_compute_attributed_seconds", Counter,
        &[NODE, GPU, UUID, SHARING_MODE, MIG_UUID, METHOD],
        "Device-seconds of the device's busy time given to pods, by the rule that gave them.",
        doc = "Device-seconds of the GPU's (or MIG instance's) busy time given to pods, by the \
             rule that gave them (see gpu_compute_split_info). Divided by \
             gpu_compute_busy_seconds_total: the attribution coverage.";
    GPU_POD_SM_UTILIZATION = "gpu_pod_sm_utilization_ratio", Gauge, POD_LABELS,
        "The pod's share of the device's time running kernels; absent when no rule can tell.",
        doc = "The pod's share of the device's time running kernels: its containers' figures \
             summed, or the device's own reading when the pod's containers are the only ones \
             running kernels there (sole-active-pod) even though no container's share is known; \
             absent when no rule can tell. What a bill uses.";
    GPU_POD_ATTRIBUTED = "gpu_pod_attributed_seconds", Counter, POD_METHOD_LABELS,
        "Device-seconds attributed to the pod, by the rule that attributed them.",
        doc = "Device-seconds attributed to the pod (gpu_pod_sm_utilization_ratio integrated over \
             samples), by the rule that attributed them: sole-active-process, \
             sole-active-container, sole-active-pod, probe, mig-instance (measured) or \
             by-difference (the device's busy time less probed co-tenants' claims; billed apart).";
    GPU_POD_UNATTRIBUTED = "gpu_pod_unattributed_seconds", Counter, POD_LABELS,
        "Device-seconds the device was busy but gave nobody while the pod may have run kernels \
         there; does not add up across pods.",
        doc = "Device-seconds the device measured busy but gave nobody (withheld or disputed) \
             while the pod had a process that may have run kernels there: time that may be the \
             pod's or a co-tenant's. Counted for each such pod, so it does not add up across \
             pods; a bill line's coverage is attributed / (attributed + this).";
    GPU_CONTAINER_ALLOCATION = "gpu_container_allocation", Gauge, CONTAINER_ALLOCATION_LABELS,
        "The kubelet allocated this device to the container (claim is the DRA claim, empty for the \
         device plugin); value 1.";
    GPU_CONTAINER_MEMORY_USED = "gpu_container_memory_used_bytes", Gauge, CONTAINER_LABELS,
        "GPU memory held by the container's processes on the device.";
    GPU_CONTAINER_SM_UTILIZATION = "gpu_container_sm_utilization_ratio", Gauge, CONTAINER_LABELS,
        "The container's share of the device's time running kernels; absent when no source can \
         know it.",
        doc = "The container's share of the device's time running kernels, summed over its \
             processes; absent when no source can know it (several processes active and no CUDA \
             probe, or under time-slicing without the probes' timelines a process whose kernels \
             outlast time slices beside another tenant's: see /debug/attribution). On MIG, the \
             instance's GPM SM activity when the container is its one active holder.";
    GPU_CONTAINER_BUSY_RATIO = "gpu_container_busy_ratio", Gauge, CONTAINER_LABELS,
        "CUDA probe: the container's kernel busy time over the trailing --activity.window, as a \
         share of the device.",
        doc = "CUDA probe: the container's kernel busy time over the trailing --activity.window, \
             as a share of the device (under time-slicing: split per millisecond by the probes' \
             timelines, or scaled to the device's measured busy time without them).";
    GPU_CONTAINER_BUSY_LOWER = "gpu_container_busy_ratio_lower", Gauge, CONTAINER_LABELS,
        "CUDA probe: the lower bound the evidence sets on the container's busy ratio.",
        doc = "CUDA probe: what the evidence bounds the container's busy ratio by from below: the \
             time its kernels' solo durations explain, each kernel counting at most its estimate \
             (from the probes' timelines, over their window, 2 s behind; absent without them). \
             Where a probe traces in duty cycles, both bounds are read from a sample of the \
             window and widened by three standard errors of that sample. Published beside \
             gpu_container_busy_ratio, and alone where that point figure is withheld (see \
             gpu_compute_split_info). A bill that must not overcharge takes this.";
    GPU_CONTAINER_BUSY_UPPER = "gpu_container_busy_ratio_upper", Gauge, CONTAINER_LABELS,
        "CUDA probe: the upper bound the evidence sets on the container's busy ratio.",
        doc = "CUDA probe: what the evidence bounds the container's busy ratio by from above: with \
             the probes' timelines, under time-slicing its kernels' spans less what the other \
             tenants' kernels must have run in the same milliseconds (one context runs at a \
             time), under MPS its spans (its kernels' slowdown beside other clients' included); \
             without timelines, the union of its kernel spans, which also holds the slices it \
             waited out. Capacity planning takes this.";
    GPU_CONTAINER_BUSY = "gpu_container_busy_seconds", Counter, CONTAINER_LABELS,
        "CUDA probe: seconds of device time the container's kernels used (gpu_container_busy_ratio \
         integrated over samples).";
    GPU_CONTAINER_IDLE_NOW = "gpu_container_idle", Gauge, CONTAINER_LABELS,
        "1 when the container held the device and was known idle this sample, 0 when busy or \
         unknown.",
        doc = "1 when the container held the device and was known idle this sample (see \
             gpu_container_idle_seconds_total), 0 when busy or unknown (the idle alerts read the \
             slope of gpu_container_idle_seconds_total, the same figure integrated over every \
             sample).";
    GPU_CONTAINER_IDLE = "gpu_container_idle_seconds", Counter, CONTAINER_LABELS,
        "Seconds the container held the device while known idle.",
        doc = "Seconds the container held the device while known idle: the device idle, nothing of \
             it running there, or all its processes quiet (no kernels by NVML or the probe and no \
             CPU time).";
    GPU_CONTAINER_ACTIVITY_UNKNOWN = "gpu_container_activity_unknown_seconds", Counter,
        CONTAINER_LABELS,
        "Seconds the container held the device while no source could tell whether it was idle \
         (counted neither idle nor busy).";
    GPU_CONTAINER_ENERGY = "gpu_container_energy_joules", Counter, CONTAINER_ENERGY_LABELS,
        "Energy of the device charged to the container, by whether the split knew it idle when \
         charged.",
        doc = "Energy of the device charged to the container, by whether the compute split knew it \
             idle when charged (activity: idle, or not-idle for busy or undecided): its holding's \
             part of the idle floor (split equally among holders, or by grant), and the power \
             above the floor times its measured compute share (none while its share is withheld). \
             Credited when the GPU's energy counter is read (--nvml.slow-interval). Idle energy \
             is what an allocation burned doing nothing (docs/energy.md).";
    GPU_CONTAINER_DYNAMIC_ENERGY = "gpu_container_dynamic_energy_joules", Counter, CONTAINER_LABELS,
        "Of gpu_container_energy_joules_total, the part above the GPU's idle floor.",
        doc = "Of gpu_container_energy_joules_total, the part above the GPU's idle floor: its \
             compute share of the power the work drew (not counted while no floor is known).";
    GPU_CONTAINER_ENERGY_LOWER = "gpu_container_energy_lower_joules", Counter, CONTAINER_LABELS,
        "Of the dynamic energy withheld while the probes published only bounds, what the \
         container's lower busy bound makes its own.",
        doc = "Of the dynamic energy withheld while the CUDA probes published only bounds \
             (gpu_energy_unattributed_joules_total{reason=\"bounds-only\"}), what the container's \
             lower busy bound makes its own. A bill that must not overcharge adds this to \
             gpu_container_energy_joules_total.";
    GPU_CONTAINER_ENERGY_UPPER = "gpu_container_energy_upper_joules", Counter, CONTAINER_LABELS,
        "Of the same withheld energy, what its upper busy bound allows (capacity planning).";
    GPU_CONTAINER_UNALLOCATED_USE = "gpu_container_unallocated_use", Gauge, CONTAINER_LABELS,
        "1 when the container runs processes on a device it was not allocated (the device plugin \
         was bypassed).";
    GPU_CONTAINER_MEMORY_LIMIT = "gpu_container_memory_limit_bytes", Gauge, CONTAINER_LABELS,
        "GPU memory the container may use on the device: a fractional scheduler's grant or its MPS \
         limit.",
        doc = "GPU memory the container may use on the device: a fractional scheduler's grant \
             (HAMi, Volcano vGPU, KAI), its MPS pinned-memory limit (its env, or its DRA claim's \
             GpuConfig), or the device plugin's even MPS split.";
    GPU_CONTAINER_COMPUTE_LIMIT = "gpu_container_compute_limit_ratio", Gauge, CONTAINER_LABELS,
        "Share of the device's SMs the container may use; absent when unlimited.",
        doc = "Share of the device's SMs the container may use: HAMi/Volcano cores, its MPS \
             active-thread percentage (its env, or its DRA claim's GpuConfig), or the device \
             plugin's even MPS split; absent when unlimited.";
    GPU_PROCESS_MEMORY_USED = "gpu_process_memory_used_bytes", Gauge, PROCESS_LABELS,
        "GPU memory the process holds.";
    GPU_PROCESS_SM_UTILIZATION = "gpu_process_sm_utilization_ratio", Gauge, PROCESS_LABELS,
        "The process's share of the device's time running kernels; absent when NVML cannot tell \
         and no probe runs.",
        doc = "The process's share of the device's time running kernels: NVML's newest sample \
             (read every --nvml.process-interval) when it is the one process that may run \
             kernels, the CUDA probe's when it runs, 0 when quiet; absent otherwise (NVML books \
             time-sliced samples to one process and MPS clients' to the server).";
    GPU_PROCESS_BUSY_RATIO = "gpu_process_busy_ratio", Gauge, PROCESS_LABELS,
        "CUDA probe: the process's kernel busy time over the trailing --activity.window, as a \
         share of the device.",
        doc = "CUDA probe: the process's kernel busy time over the trailing --activity.window, or \
             over the part of it the probe traced when it traces in duty cycles (under \
             time-slicing: split per millisecond by the probes' timelines over their window, 2 s \
             behind, a millisecond several processes' kernels covered by their solo durations, \
             each scaled by what its estimates missed where it ran alone; without timelines, \
             scaled to the device's busy time, and absent for a process whose kernels outlast \
             time slices beside another tenant's; under MPS, its kernels' solo durations where \
             other clients' kernels ran beside its own, plus a share of the device's busy time \
             those leave unexplained, up to its spans; absent where the probes' timelines were \
             stretched past what the checks accept, leaving only gpu_process_busy_ratio_lower / \
             _upper).";
    GPU_PROCESS_BUSY_LOWER = "gpu_process_busy_ratio_lower", Gauge, PROCESS_LABELS,
        "CUDA probe: gpu_container_busy_ratio_lower for one process.";
    GPU_PROCESS_BUSY_UPPER = "gpu_process_busy_ratio_upper", Gauge, PROCESS_LABELS,
        "CUDA probe: gpu_container_busy_ratio_upper for one process.";
    GPU_PROCESS_KERNELS = "gpu_process_kernels", Counter, PROCESS_LABELS,
        "CUDA probe: kernels the probe recorded in the process since it started there.",
        doc = "CUDA probe: kernels the probe recorded in the process since it started there (all \
             of them, unless it traces in duty cycles: a launch-bound process, see \
             TESSERA_PROBE_OVERHEAD).";
    GPU_PROCESS_MEMORY_UTILIZATION = "gpu_process_memory_utilization_ratio", Gauge, PROCESS_LABELS,
        "The process's share of memory-controller time in NVML's newest sample for it, read every \
         --nvml.process-interval (absent on MIG and for MPS clients).";
    TESSERA_BUILD_INFO = "tessera_build_info", Gauge, &[VERSION, REVISION],
        "tessera's version; value 1.";
    TESSERA_COLLECTOR_SUCCESS = "tessera_collector_success", Gauge, &[NODE, COLLECTOR],
        "1 when the collector's last attempt succeeded.";
    TESSERA_COLLECTOR_DURATION = "tessera_collector_duration_seconds", Gauge, &[NODE, COLLECTOR],
        "Duration of the collector's last attempt.";
    TESSERA_ATTRIBUTION_GAPS = "tessera_attribution_gaps", Gauge, &[NODE, KIND],
        "Things the last join could not attribute: device IDs naming no device on this node, \
         processes in pods without metadata.";
    TESSERA_NVML_ERRORS = "tessera_nvml_errors", Counter, &[NODE, CALL],
        "Failed NVML calls by call (calls a GPU does not support are learned once and not \
         counted).";
    TESSERA_NVML_CALLS = "tessera_nvml_calls", Counter, &[NODE, CALL],
        "NVML calls made, by call, summed over GPUs (a call a GPU does not support is not made \
         again).";
    TESSERA_NVML_CALL_CPU = "tessera_nvml_call_cpu_seconds", Counter, &[NODE, CALL],
        "CPU time (user and system) of the threads that made each NVML call, inside the call: \
         where tessera's sampling CPU goes.";
    TESSERA_NVML_CALL_TIME = "tessera_nvml_call_seconds", Counter, &[NODE, CALL],
        "Wall-clock time spent inside each NVML call; far above its CPU time, the call waits on \
         the driver.";
    TESSERA_NVML_WORKER_RESTARTS = "tessera_nvml_worker_restarts", Counter, &[NODE, WORKER, REASON],
        "Restarts of the worker processes that own NVML, by worker and reason.",
        doc = "Restarts of the worker processes that own NVML (--nvml.isolation=process), by \
             worker (`node`: the node's worker, which samples every GPU; or a GPU's UUID: the \
             worker of its own a GPU got after it faulted or hung in the node's) and reason: the \
             signal it died of (sigsegv, sigabrt...), exit, or hung (stopped answering, or a \
             GPU's call inside it stopped returning, and was killed). Absent until a worker is \
             restarted.";
    TESSERA_SAMPLE_DURATION = "tessera_sample_duration_seconds", Gauge, &[NODE],
        "Duration of the last whole sample cycle: every source read, the join and the encoding.";
    TESSERA_SERIES_DROPPED = "tessera_series_dropped", Gauge, &[NODE],
        "Per-container and per-process series left out of this exposition by --metrics.max-series.";
    TESSERA_LABEL_VALUES_TRUNCATED = "tessera_label_values_truncated", Gauge, &[NODE],
        "Label values cut to --metrics.max-label-value-length in this exposition.";
    TESSERA_PROBE_REPORTS_REFUSED = "tessera_probe_reports_refused", Counter, &[NODE, REASON],
        "CUDA probe reports received on --probe.socket and not used, by reason.",
        doc = "CUDA probe reports received on --probe.socket and not used, by reason: \
             `no-gpu-process` (NVML lists the sender on no GPU once 10 s, or two \
             --nvml.process-interval if longer, have passed since its first report: every report \
             of such a sender is counted, none is shown), `malformed` (not a frame of the probe's wire; the \
             connection is read no further) and `over-capacity` (a sender past the 4,096 \
             processes remembered). Each reason from 0 while the socket is on; absent without \
             it. The sender is the process the kernel names (SO_PEERCRED), never one a frame \
             names.";
    TESSERA_SAMPLES = "tessera_samples", Counter, &[NODE],
        "Sample cycles published since tessera started.";
    TESSERA_LAST_SAMPLE = "tessera_last_sample_timestamp_seconds", Gauge, &[NODE],
        "Unix time of the sample being served.";
}

/// How much an exposition carries (`--metrics.detail`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Detail {
    /// Every family tessera's alerts, recording rules, dashboards and advisor read, and the
    /// GPU health signals: about 60 series per GPU on the dense demo node (docs/scale.md).
    #[default]
    Default,
    /// Also [`FULL_DETAIL_ONLY`] and the informational clock-event reasons.
    Full,
}

/// Families served only with `--metrics.detail=full`. Nothing tessera ships reads them, and at
/// fleet scale their series cost more than they tell: per-process compute figures repeat their
/// container's on most nodes (per-process memory stays: which process holds the memory is what
/// a container's sum cannot say), the withheld-share gauges are the busy counters less the
/// attributed ones, and the rest are rarely looked at outside an investigation. dcgm-compat's
/// own families keep their fields whatever the detail.
pub const FULL_DETAIL_ONLY: &[Family] = &[
    // Room for per-process memory and energy within ~60 series per GPU: these four are read by
    // nothing tessera ships. gpu_processes is the count of the default's per-process memory
    // series; gpu_gpm_available's state is also on /debug/attribution (`gpm`).
    GPU_MEMORY_UTILIZATION,
    GPU_GPM_AVAILABLE,
    GPU_MIG_TENSOR_ACTIVITY,
    GPU_PROCESSES,
    GPU_MEMORY_RESERVED,
    GPU_SM_OCCUPANCY,
    GPU_DRAM_BANDWIDTH,
    GPU_ENCODER_UTILIZATION,
    GPU_DECODER_UTILIZATION,
    GPU_REMAPPED_ROWS,
    GPU_ROW_REMAP_PENDING,
    GPU_PCIE_REPLAYS,
    GPU_MIG_SM_OCCUPANCY,
    GPU_MIG_DRAM_BANDWIDTH,
    GPU_MIG_REPLICAS,
    GPU_MIG_UNATTRIBUTED,
    GPU_MIG_COMPUTE_SPLIT,
    GPU_UNATTRIBUTED,
    GPU_POD_SM_UTILIZATION,
    GPU_PROCESS_SM_UTILIZATION,
    GPU_PROCESS_BUSY_RATIO,
    GPU_PROCESS_BUSY_LOWER,
    GPU_PROCESS_BUSY_UPPER,
    GPU_PROCESS_KERNELS,
    GPU_PROCESS_MEMORY_UTILIZATION,
    // Self-diagnosis: where the sampling's CPU and time go (docs/benchmarks.md).
    TESSERA_NVML_CALLS,
    TESSERA_NVML_CALL_CPU,
    TESSERA_NVML_CALL_TIME,
    // Room for energy per container within ~60 series per GPU: the idle alerts read the slope
    // of gpu_container_idle_seconds_total (every sample counted, where this gauge is sampled
    // at scrapes), and nothing shipped reads the probe's integrated busy seconds.
    GPU_CONTAINER_IDLE_NOW,
    GPU_CONTAINER_BUSY,
    // What the energy split shows of itself: the floor is also on /debug/attribution
    // (`energy`), the dynamic part is the total less the holding's share of the floor.
    GPU_POWER_FLOOR,
    GPU_CONTAINER_DYNAMIC_ENERGY,
];

/// Whether `detail` serves family `f`, as a table indexed by [`Family::index`].
pub fn served(detail: Detail) -> Vec<bool> {
    let mut on = vec![true; ALL.len()];
    if detail == Detail::Default {
        for f in FULL_DETAIL_ONLY {
            on[f.index] = false;
        }
    }
    on
}

#[cfg(test)]
#[path = "table_tests.rs"]
mod tests;

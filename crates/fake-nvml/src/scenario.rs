//! The scenario file as written by people: every field a test author may set,
//! with `deny_unknown_fields` so a typo fails loudly instead of silently
//! falling back to a default. `world.rs` turns this into resolved values.

use serde::Deserialize;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Scenario {
    #[serde(default = "default_driver")]
    pub driver_version: String,
    #[serde(default = "default_nvml")]
    pub nvml_version: String,
    #[serde(default = "default_cuda")]
    pub cuda_driver_version: i32,
    #[serde(default = "default_stride")]
    pub process_struct_stride: u32,
    /// Sleep in the calls that are slow on real hardware (energy, PCIe throughput, MIG mode).
    #[serde(default)]
    pub realistic_latency: bool,
    /// Loop the phase timeline with this period, so a demo runs forever.
    #[serde(default)]
    pub repeat_after_ms: Option<u64>,
    /// Free-form; a place to hang YAML anchors (`&busy`) that phases reuse.
    #[serde(default)]
    pub templates: Option<serde_yaml::Value>,
    /// Faults active for the whole run.
    #[serde(default)]
    pub faults: Vec<FaultSpec>,
    /// Concurrent GPM calls crash the process (see [`GpmRaceSpec`]).
    #[serde(default)]
    pub gpm_race_crash: Option<GpmRaceSpec>,
    pub gpus: Vec<GpuSpec>,
    #[serde(default)]
    pub phases: Vec<PhaseSpec>,
}

fn default_driver() -> String {
    "580.159.04".into()
}
fn default_nvml() -> String {
    "13.580.159.04".into()
}
fn default_cuda() -> i32 {
    13000
}
fn default_stride() -> u32 {
    24
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GpuSpec {
    pub sku: String,
    pub uuid: Option<String>,
    pub pci_bus_id: Option<String>,
    pub minor_number: Option<u32>,
    #[serde(default)]
    pub compute_mode: ComputeMode,
    #[serde(default)]
    pub virtualization: Virtualization,
    #[serde(default = "yes")]
    pub ecc_enabled: bool,
    pub power_limit_watts: Option<u32>,
    /// Energy counter value at init, in joules (real counters start at driver load).
    #[serde(default)]
    pub energy_start_joules: u64,
    pub mig: Option<MigSpec>,
}

fn yes() -> bool {
    true
}

#[derive(Debug, Default, Clone, Copy, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum ComputeMode {
    #[default]
    Default,
    ExclusiveThread,
    Prohibited,
    ExclusiveProcess,
}

#[derive(Debug, Default, Clone, Copy, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum Virtualization {
    #[default]
    None,
    Passthrough,
    Vgpu,
    HostVgpu,
    HostVsga,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MigSpec {
    #[serde(default)]
    pub instances: Vec<MigInstanceSpec>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MigInstanceSpec {
    pub profile: String,
    pub placement: Option<u32>,
    pub uuid: Option<String>,
    pub gpu_instance_id: Option<u32>,
    pub compute_instance_id: Option<u32>,
}

/// Points at a MIG instance either by its position in `mig.instances` or by its MIG UUID.
#[derive(Debug, Clone, Deserialize, PartialEq, Eq, PartialOrd, Ord)]
#[serde(untagged)]
pub enum InstanceRef {
    Index(usize),
    Uuid(String),
}

impl std::fmt::Display for InstanceRef {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            InstanceRef::Index(i) => write!(f, "{i}"),
            InstanceRef::Uuid(u) => f.write_str(u),
        }
    }
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PhaseSpec {
    pub at_ms: u64,
    /// Only for humans reading the file and for error messages.
    pub name: Option<String>,
    #[serde(default)]
    pub gpus: Vec<GpuPhaseSpec>,
    /// Everything running during the phase; a process absent here has exited.
    #[serde(default)]
    pub processes: Vec<ProcessSpec>,
    /// XIDs raised when the phase starts.
    #[serde(default)]
    pub xids: Vec<XidSpec>,
    #[serde(default)]
    pub faults: Vec<FaultSpec>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct XidSpec {
    pub gpu: usize,
    pub xid: u64,
}

#[derive(Debug, Default, Clone, Copy, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct RemappedRowsSpec {
    #[serde(default)]
    pub correctable: u32,
    #[serde(default)]
    pub uncorrectable: u32,
    #[serde(default)]
    pub pending: bool,
    #[serde(default)]
    pub failure: bool,
}

/// What one GPU does during a phase. Omitted numbers are derived (see README).
#[derive(Debug, Default, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GpuPhaseSpec {
    #[serde(alias = "index")]
    pub gpu: usize,
    pub utilization: Option<u32>,
    pub memory_utilization: Option<u32>,
    pub power_watts: Option<f64>,
    pub temperature_celsius: Option<u32>,
    pub sm_clock_mhz: Option<u32>,
    pub memory_clock_mhz: Option<u32>,
    pub clock_event_reasons: Option<Vec<ClockReason>>,
    #[serde(default)]
    pub ecc: EccSpec,
    #[serde(default)]
    pub pcie_replays: u32,
    pub pcie_tx_kbps: Option<u32>,
    pub pcie_rx_kbps: Option<u32>,
    /// HBM temperature (NVML_FI_DEV_MEMORY_TEMP); derived from the GPU's when omitted.
    pub memory_temperature_celsius: Option<u32>,
    /// Video engines, percent; idle (0) when omitted.
    #[serde(default)]
    pub encoder_utilization: u32,
    #[serde(default)]
    pub decoder_utilization: u32,
    /// nvmlDeviceGetRemappedRows; none when omitted.
    #[serde(default)]
    pub remapped_rows: RemappedRowsSpec,
    #[serde(default)]
    pub gpm: GpmSpec,
    #[serde(default)]
    pub mig_gpm: BTreeMap<InstanceRef, GpmSpec>,
    #[serde(default)]
    pub lost: bool,
    pub memory_used_mib: Option<u64>,
    /// A live re-partition: the MIG layout from this phase on (until another phase sets one;
    /// a repeating timeline starts over from `gpus[].mig`). Instances keep their identity when
    /// they keep their UUID or, without one, their profile, placement and ids.
    pub mig: Option<MigSpec>,
}

#[derive(Debug, Default, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EccSpec {
    #[serde(default)]
    pub corrected: u64,
    #[serde(default)]
    pub uncorrected: u64,
    pub aggregate_corrected: Option<u64>,
    pub aggregate_uncorrected: Option<u64>,
}

/// GPM percentages (0..100). Omitted ones are derived from utilization.
#[derive(Debug, Default, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GpmSpec {
    pub graphics_activity: Option<f64>,
    pub sm_activity: Option<f64>,
    pub sm_occupancy: Option<f64>,
    pub integer_activity: Option<f64>,
    pub tensor_activity: Option<f64>,
    pub dfma_tensor_activity: Option<f64>,
    pub hmma_tensor_activity: Option<f64>,
    pub imma_tensor_activity: Option<f64>,
    pub dram_bandwidth: Option<f64>,
    pub fp64: Option<f64>,
    pub fp32: Option<f64>,
    pub fp16: Option<f64>,
}

#[derive(Debug, Clone, Copy, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum ClockReason {
    GpuIdle,
    ApplicationsClocksSetting,
    SwPowerCap,
    HwSlowdown,
    SyncBoost,
    SwThermalSlowdown,
    HwThermalSlowdown,
    HwPowerBrakeSlowdown,
    DisplayClockSetting,
}

impl ClockReason {
    pub fn bit(self) -> u64 {
        match self {
            ClockReason::GpuIdle => 0x1,
            ClockReason::ApplicationsClocksSetting => 0x2,
            ClockReason::SwPowerCap => 0x4,
            ClockReason::HwSlowdown => 0x8,
            ClockReason::SyncBoost => 0x10,
            ClockReason::SwThermalSlowdown => 0x20,
            ClockReason::HwThermalSlowdown => 0x40,
            ClockReason::HwPowerBrakeSlowdown => 0x80,
            ClockReason::DisplayClockSetting => 0x100,
        }
    }
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ProcessSpec {
    /// Host PID as NVML reports it; exactly one of `pid` and `pid_file`.
    pub pid: Option<u32>,
    /// A file naming the host PID of a real process (the node tests' pods): read at every
    /// call, and the process is listed only while the file names a running one.
    pub pid_file: Option<PathBuf>,
    pub gpu: usize,
    /// Ignored by the fake; the exporter's demo uses it to fake /proc/<pid>/comm.
    pub comm: Option<String>,
    /// Ignored by the fake; the exporter's demo may use it to fake /proc/<pid>/cgroup.
    pub cgroup: Option<String>,
    #[serde(default)]
    pub kind: ProcessKind,
    #[serde(default)]
    pub memory_mib: u64,
    /// Report NVML_VALUE_NOT_AVAILABLE as used memory (as some containers/drivers do).
    #[serde(default)]
    pub memory_unavailable: bool,
    #[serde(default)]
    pub sm_util: u32,
    #[serde(default)]
    pub mem_util: u32,
    pub mig_instance: Option<InstanceRef>,
    /// Ignored by the fake; the exporter's demo and tests advance the process's CPU time in
    /// their procfs tree at this rate (percent of a core).
    pub cpu_percent: Option<f64>,
}

#[derive(Debug, Default, Clone, Copy, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum ProcessKind {
    #[default]
    Compute,
    Graphics,
    /// Both a compute and a graphics context ("C+G" in nvidia-smi).
    ComputeGraphics,
    /// An MPS client ("M+C"): in the compute list and in the MPS list.
    MpsClient,
    /// `nvidia-cuda-mps-server`: in the compute list only.
    MpsServer,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FaultSpec {
    /// NVML symbol name, or "*" for every call that concerns `gpu`.
    pub call: String,
    pub gpu: Option<usize>,
    pub error: Option<ErrorName>,
    pub slow_ms: Option<u64>,
    /// Kill the calling process inside the call, as a faulting driver library does.
    pub crash: Option<CrashKind>,
    /// With `crash`: the matching call (counted in this process) that crashes; 1 by default.
    pub after_calls: Option<u64>,
}

/// How a `crash` fault ends the process: a real signal, never an error code.
#[derive(Debug, Clone, Copy, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum CrashKind {
    /// SIGSEGV, as in the GPM crash seen on a 2-GPU H100 host.
    Segv,
    /// SIGABRT, as an assertion inside the library would.
    Abort,
}

/// Crash like the real library did when two threads made GPM calls at once: every GPM call
/// is held in flight for `hold_ms`, and a GPM call that starts while another thread's is in
/// flight raises SIGSEGV.
#[derive(Debug, Clone, Copy, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GpmRaceSpec {
    #[serde(default = "default_race_hold")]
    pub hold_ms: u64,
}

fn default_race_hold() -> u64 {
    2
}

#[derive(Debug, Clone, Copy, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum ErrorName {
    Uninitialized,
    InvalidArgument,
    NotSupported,
    NoPermission,
    NotFound,
    InsufficientSize,
    InsufficientPower,
    DriverNotLoaded,
    Timeout,
    IrqIssue,
    LibraryNotFound,
    FunctionNotFound,
    CorruptedInforom,
    GpuLost,
    ResetRequired,
    OperatingSystem,
    LibRmVersionMismatch,
    InUse,
    Memory,
    NoData,
    InsufficientResources,
    ArgumentVersionMismatch,
    NotReady,
    GpuNotFound,
    InvalidState,
    Unknown,
}

impl ErrorName {
    pub fn code(self) -> u32 {
        use ErrorName::*;
        match self {
            Uninitialized => 1,
            InvalidArgument => 2,
            NotSupported => 3,
            NoPermission => 4,
            NotFound => 6,
            InsufficientSize => 7,
            InsufficientPower => 8,
            DriverNotLoaded => 9,
            Timeout => 10,
            IrqIssue => 11,
            LibraryNotFound => 12,
            FunctionNotFound => 13,
            CorruptedInforom => 14,
            GpuLost => 15,
            ResetRequired => 16,
            OperatingSystem => 17,
            LibRmVersionMismatch => 18,
            InUse => 19,
            Memory => 20,
            NoData => 21,
            InsufficientResources => 23,
            ArgumentVersionMismatch => 25,
            NotReady => 27,
            GpuNotFound => 28,
            InvalidState => 29,
            Unknown => 999,
        }
    }
}

impl ProcessSpec {
    /// Names the process in error messages.
    pub fn label(&self) -> String {
        match (&self.pid, &self.pid_file) {
            (Some(pid), _) => format!("pid {pid}"),
            (None, Some(file)) => format!("pid_file {}", file.display()),
            (None, None) => "a process without pid".into(),
        }
    }
}

impl Scenario {
    /// Parses YAML, resolving anchors and `<<` merge keys first so scenario
    /// authors can reuse a busy-GPU block across phases.
    pub fn parse(text: &str) -> Result<Scenario, String> {
        let mut value: serde_yaml::Value =
            serde_yaml::from_str(text).map_err(|e| format!("invalid YAML: {e}"))?;
        if !has_merge_key(&value) {
            // Straight from the text, errors carry a line and column.
            return serde_yaml::from_str(text).map_err(|e| format!("invalid scenario: {e}"));
        }
        value
            .apply_merge()
            .map_err(|e| format!("invalid YAML merge key: {e}"))?;
        serde_yaml::from_value(value).map_err(|e| format!("invalid scenario: {e}"))
    }

    pub fn load(path: &Path) -> Result<Scenario, String> {
        let text = std::fs::read_to_string(path)
            .map_err(|e| format!("cannot read {}: {e}", path.display()))?;
        Scenario::parse(&text).map_err(|e| format!("{}: {e}", path.display()))
    }
}

fn has_merge_key(v: &serde_yaml::Value) -> bool {
    match v {
        serde_yaml::Value::Mapping(m) => m
            .iter()
            .any(|(k, v)| k.as_str() == Some("<<") || has_merge_key(v)),
        serde_yaml::Value::Sequence(s) => s.iter().any(has_merge_key),
        serde_yaml::Value::Tagged(t) => has_merge_key(&t.value),
        _ => false,
    }
}

/// Metadata about one scenario process, for tools (e.g. a demo that fakes
/// procfs) that need every pid the fake may report and its command name.
/// Processes named by `pid_file` are real ones, with a procfs of their own: not listed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProcessMeta {
    pub pid: u32,
    pub gpu: usize,
    pub comm: Option<String>,
    pub cgroup: Option<String>,
}

impl Scenario {
    /// The phase timeline stretched `scale` times (phase starts and the loop's period), so that
    /// a slow host (an emulated CPU) reaches a phase change at the point in its own run where a
    /// native one does: after discovery and the first sample, not before. Durations of faults
    /// and the figures themselves are left as they are.
    pub fn stretch_timeline(&mut self, scale: f64) -> Result<(), String> {
        if !(scale.is_finite() && scale >= 1.0) {
            return Err(format!(
                "a timeline scale must be a number ≥ 1, not {scale}"
            ));
        }
        let stretch = |ms: u64| (ms as f64 * scale).round() as u64;
        for phase in &mut self.phases {
            phase.at_ms = stretch(phase.at_ms);
        }
        self.repeat_after_ms = self.repeat_after_ms.map(stretch);
        Ok(())
    }

    /// Every distinct (pid, gpu) across all phases, in first-seen order.
    pub fn processes(&self) -> Vec<ProcessMeta> {
        let mut out: Vec<ProcessMeta> = Vec::new();
        for p in self.phases.iter().flat_map(|ph| &ph.processes) {
            let Some(pid) = p.pid else { continue };
            if !out.iter().any(|m| m.pid == pid && m.gpu == p.gpu) {
                out.push(ProcessMeta {
                    pid,
                    gpu: p.gpu,
                    comm: p.comm.clone(),
                    cgroup: p.cgroup.clone(),
                });
            }
        }
        out
    }
}

//! NVML's flags: the library, its call cadences, what it collects and where it runs; and
//! [`NvmlOptions`], what they resolve to and the source runs with.

use std::path::PathBuf;
use std::time::Duration;

use super::Isolation;
use crate::options::{parse_positive_duration, Resolver};

#[derive(Debug, Default, clap::Args)]
pub struct NvmlArgs {
    /// Path of libnvidia-ml.so [default: the system's libnvidia-ml.so.1].
    #[arg(long = "nvml.library", env = "TESSERA_NVML_LIBRARY")]
    pub nvml_library: Option<String>,
    /// Cadence of slow NVML calls: energy counter and MIG mode [default: 10s].
    #[arg(long = "nvml.slow-interval", env = "TESSERA_NVML_SLOW_INTERVAL")]
    pub nvml_slow_interval: Option<String>,
    /// Cadence of per-process utilization, NVML's costliest call; a new process is read at
    /// once (1s costs ~0.12 % of a core more on an H100) [default: 5s].
    #[arg(long = "nvml.process-interval", env = "TESSERA_NVML_PROCESS_INTERVAL")]
    pub nvml_process_interval: Option<String>,
    /// How long a sample waits for a GPU before reporting it down (a hung driver call stalls only its GPU) [default: 2s].
    #[arg(long = "nvml.timeout", env = "TESSERA_NVML_TIMEOUT")]
    pub nvml_timeout: Option<String>,
    /// The host's procfs (NVML reports host PIDs) [default: /proc].
    #[arg(long = "path.procfs", env = "TESSERA_PATH_PROCFS")]
    pub procfs: Option<String>,
    /// Read per-process figures from NVML, what per-container attribution is made of (their own series need --metrics.detail=full) [default: true].
    #[arg(long = "collect.processes", env = "TESSERA_COLLECT_PROCESSES", value_name = "BOOL", num_args = 0..=1,
          require_equals = true, default_missing_value = "true", overrides_with = "no_collect_processes")]
    pub collect_processes: Option<String>,
    #[arg(
        long = "no-collect.processes",
        hide = true,
        overrides_with = "collect_processes"
    )]
    pub no_collect_processes: bool,
    /// Per-MIG-instance series [default: true].
    #[arg(long = "collect.mig", env = "TESSERA_COLLECT_MIG", value_name = "BOOL", num_args = 0..=1,
          require_equals = true, default_missing_value = "true", overrides_with = "no_collect_mig")]
    pub collect_mig: Option<String>,
    #[arg(long = "no-collect.mig", hide = true, overrides_with = "collect_mig")]
    pub no_collect_mig: bool,
    /// Read GPM (SM, tensor and DRAM activity, NVLink and PCIe rates); turn it off where DCGM's profiling module must own the counters (docs/migrating-from-dcgm-exporter.md) [default: true].
    #[arg(long = "collect.gpm", env = "TESSERA_COLLECT_GPM", value_name = "BOOL", num_args = 0..=1,
          require_equals = true, default_missing_value = "true", overrides_with = "no_collect_gpm")]
    pub collect_gpm: Option<String>,
    #[arg(long = "no-collect.gpm", hide = true, overrides_with = "collect_gpm")]
    pub no_collect_gpm: bool,
    /// Where NVML runs: `process` (one worker process for the node, restarted if the driver library crashes or hangs: a fault costs every GPU one sample, never the exporter, and a GPU that faults moves to a worker of its own; docs/reliability.md) or `thread` (in the exporter itself: one process less, but a driver-library crash takes the exporter down) [default: process].
    #[arg(long = "nvml.isolation", env = "TESSERA_NVML_ISOLATION")]
    pub nvml_isolation: Option<String>,
}

#[derive(Debug, Clone)]
pub struct NvmlOptions {
    /// `None`: the system's libnvidia-ml.so.1.
    pub library: Option<PathBuf>,
    pub procfs: PathBuf,
    /// Cadence of the slow calls: energy (~3-4 ms on an H100), PCIe replays (~120 µs) and MIG
    /// mode (~110-150 µs).
    pub slow_interval: Duration,
    /// Cadence of per-process utilization: ~1.7 ms per GPU on an H100, more than all the other
    /// per-cycle calls together.
    pub process_interval: Duration,
    pub collect_processes: bool,
    pub collect_mig: bool,
    /// Read GPM (`--collect.gpm`); off leaves the profiling counters to DCGM's profiling module.
    pub collect_gpm: bool,
    pub isolation: Isolation,
    /// How long a cycle waits for a GPU before reporting it down (a hung driver call).
    pub gpu_timeout: Duration,
}

/// What each flag's help names as its default. Code that builds options by hand (a worker
/// process, the cost example) takes the rest from here, so a new option is added in this file
/// only.
impl Default for NvmlOptions {
    fn default() -> Self {
        NvmlOptions {
            library: None,
            procfs: PathBuf::from("/proc"),
            slow_interval: Duration::from_secs(10),
            process_interval: Duration::from_secs(5),
            collect_processes: true,
            collect_mig: true,
            collect_gpm: true,
            isolation: Isolation::Process,
            gpu_timeout: Duration::from_secs(2),
        }
    }
}

impl NvmlArgs {
    pub fn resolve(&self, r: &mut Resolver) -> NvmlOptions {
        let d = NvmlOptions::default();
        NvmlOptions {
            library: r.get("nvml.library", &self.nvml_library, d.library, |s| {
                Ok(Some(PathBuf::from(s)))
            }),
            slow_interval: r.get(
                "nvml.slow-interval",
                &self.nvml_slow_interval,
                d.slow_interval,
                parse_positive_duration,
            ),
            process_interval: r.get(
                "nvml.process-interval",
                &self.nvml_process_interval,
                d.process_interval,
                parse_positive_duration,
            ),
            gpu_timeout: r.get(
                "nvml.timeout",
                &self.nvml_timeout,
                d.gpu_timeout,
                parse_positive_duration,
            ),
            procfs: r.get("path.procfs", &self.procfs, d.procfs, |s| {
                Ok(PathBuf::from(s))
            }),
            collect_processes: r.get_bool(
                "collect.processes",
                &self.collect_processes,
                self.no_collect_processes,
                d.collect_processes,
            ),
            collect_mig: r.get_bool(
                "collect.mig",
                &self.collect_mig,
                self.no_collect_mig,
                d.collect_mig,
            ),
            collect_gpm: r.get_bool(
                "collect.gpm",
                &self.collect_gpm,
                self.no_collect_gpm,
                d.collect_gpm,
            ),
            isolation: r.get(
                "nvml.isolation",
                &self.nvml_isolation,
                d.isolation,
                |s| match s.trim() {
                    "process" => Ok(Isolation::Process),
                    "thread" => Ok(Isolation::Thread),
                    _ => Err("expected `process` or `thread`".into()),
                },
            ),
        }
    }
}

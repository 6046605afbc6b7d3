//! NVML source: everything tessera reads from the GPUs, through nvml-wrapper. Production, tests
//! and the demo all take this path; only the library loaded differs (`--nvml.library`).
//!
//! NVML calls block, so the source lives on the sampler's own thread and is never touched by
//! the async runtime.

mod device;
mod events;
mod ledger;
mod mig;
mod process;
mod utilization;
mod worker;

use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use worker::GpuWorker;

use nvml_wrapper::error::NvmlError;
use nvml_wrapper::{Device, Nvml};

use crate::model::{GpuSample, NvmlSample};
pub use device::clock_event_reasons;
pub use events::XidWatcher;
use ledger::CallLedger;
pub use process::read_samples as read_process_utilization;

static NVML: OnceLock<Nvml> = OnceLock::new();

#[derive(Debug, thiserror::Error)]
pub enum NvmlOpenError {
    #[error("NVML library not found ({detail}); on a machine without a GPU try `tessera --demo`")]
    NotFound { detail: String },
    #[error("NVML failed to initialize: {0}")]
    Init(NvmlError),
}

/// Loads and initializes NVML once for the life of the process (devices borrow it).
pub fn open(library: Option<&Path>) -> Result<&'static Nvml, NvmlOpenError> {
    if let Some(nvml) = NVML.get() {
        return Ok(nvml);
    }
    let mut builder = Nvml::builder();
    if let Some(path) = library {
        builder.lib_path(path.as_os_str());
    }
    let nvml = builder.init().map_err(|e| match e {
        NvmlError::LibloadingError(inner) => NvmlOpenError::NotFound {
            detail: inner.to_string(),
        },
        NvmlError::LibraryNotFound => NvmlOpenError::NotFound {
            detail: library
                .map(|p| p.display().to_string())
                .unwrap_or_else(|| "libnvidia-ml.so.1".into()),
        },
        other => NvmlOpenError::Init(other),
    })?;
    Ok(NVML.get_or_init(|| nvml))
}

#[derive(Debug, Clone)]
pub struct NvmlOptions {
    pub procfs: PathBuf,
    /// Cadence of the slow calls: energy (~3-4 ms on an H100), PCIe replays (~120 µs) and MIG
    /// mode (~110-150 µs).
    pub slow_interval: Duration,
    /// Cadence of per-process utilization: ~1.7 ms per GPU on an H100, more than all the other
    /// per-cycle calls together.
    pub process_interval: Duration,
    pub collect_processes: bool,
    pub collect_mig: bool,
    /// How long a cycle waits for a GPU before reporting it down (a hung driver call).
    pub gpu_timeout: Duration,
}

/// What is kept per GPU between cycles (on that GPU's worker thread).
struct GpuState {
    handle: Device<'static>,
    /// Identity read once; kept so a lost GPU still has its labels.
    identity: GpuSample,
    key: String,
    mig_enabled: Option<bool>,
    energy_joules: Option<f64>,
    pcie_replays: Option<u64>,
    remapped_rows: Option<crate::model::RemappedRows>,
    memory_temperature_celsius: Option<f64>,
    mig_slices_total: Option<u32>,
    gpm: Option<device::GpmState>,
    process_util: process::UtilizationReader,
    utilization_marks: utilization::SampleMarks,
    mig: mig::MigCache,
}

impl GpuState {
    fn new(handle: Device<'static>, identity: GpuSample, key: String) -> Self {
        Self {
            handle,
            identity,
            key,
            mig_enabled: None,
            energy_joules: None,
            pcie_replays: None,
            remapped_rows: None,
            memory_temperature_celsius: None,
            mig_slices_total: None,
            gpm: None,
            process_util: process::UtilizationReader::default(),
            utilization_marks: utilization::SampleMarks::default(),
            mig: mig::MigCache::default(),
        }
    }
}

/// Whether a cadence has come round. A tenth of slack keeps a cadence equal to (or a multiple
/// of) the sample interval from slipping a whole cycle when a cycle starts a little early.
fn is_due(last: Option<Instant>, interval: Duration) -> bool {
    last.is_none_or(|t| t.elapsed() >= interval - interval / 10)
}

pub struct NvmlSource {
    nvml: &'static Nvml,
    opts: NvmlOptions,
    /// Node-level calls (device count, handles, identity); per-GPU calls keep their own.
    ledger: CallLedger,
    driver_version: String,
    gpus: Vec<GpuWorker>,
    last_slow: Option<Instant>,
    timeouts: u64,
    xids: events::Counters,
}

impl NvmlSource {
    pub fn new(nvml: &'static Nvml, opts: NvmlOptions) -> Self {
        let driver_version = nvml.sys_driver_version().unwrap_or_default();
        Self {
            nvml,
            opts,
            ledger: CallLedger::default(),
            driver_version,
            gpus: Vec::new(),
            last_slow: None,
            timeouts: 0,
            xids: Arc::default(),
        }
    }

    /// Counters the XID watcher thread increments, keyed by GPU UUID.
    pub fn xid_counters(&self) -> events::Counters {
        self.xids.clone()
    }

    fn discover(&mut self) {
        let count = match self
            .ledger
            .call("node", "device_count", || self.nvml.device_count())
        {
            ledger::Outcome::Value(c) => c,
            _ => return,
        };
        if count as usize == self.gpus.len() {
            return;
        }
        tracing::info!(gpus = count, "discovered GPUs");
        let mut gpus = Vec::with_capacity(count as usize);
        for index in 0..count {
            let key = format!("index:{index}");
            let nvml = self.nvml;
            let Some(handle) = self
                .ledger
                .call(&key, "device_by_index", || nvml.device_by_index(index))
                .ok()
            else {
                continue;
            };
            let identity = device::identity(&mut self.ledger, &key, index, &handle);
            let key = if identity.uuid.is_empty() {
                key
            } else {
                identity.uuid.clone()
            };
            match GpuWorker::spawn(self.nvml, handle, identity, key, self.opts.clone()) {
                Ok(w) => gpus.push(w),
                Err(e) => {
                    tracing::error!(gpu = index, error = %e, "cannot start the GPU's sampling thread")
                }
            }
        }
        // Dropping the old workers closes their channels; each thread ends after its call.
        self.gpus = gpus;
    }

    /// One sample of every GPU. Never fails as a whole: a GPU that fails is reported down.
    pub fn sample(&mut self) -> NvmlSample {
        let started = Instant::now();
        self.ledger.begin_cycle();
        self.discover();
        let slow_due = is_due(self.last_slow, self.opts.slow_interval);
        if slow_due {
            self.last_slow = Some(Instant::now());
        }
        let xids = self.xids.lock().map(|m| m.clone()).unwrap_or_default();
        for w in &mut self.gpus {
            w.request(slow_due);
        }
        // GPUs answer in parallel; one deadline bounds the whole cycle.
        let deadline = Instant::now() + self.opts.gpu_timeout;
        let mut failed = self.ledger.cycle_failed();
        let mut gpus = Vec::with_capacity(self.gpus.len());
        for w in &mut self.gpus {
            let (sample, outcome) = w.collect(deadline);
            let mut s = match (sample, outcome) {
                (Some(s), worker::Outcome::Answered { failed: f }) => {
                    failed |= f;
                    if w.stuck {
                        tracing::info!(uuid = %w.identity.uuid, "GPU answers again");
                        w.stuck = false;
                    }
                    s
                }
                _ => {
                    failed = true;
                    self.timeouts += 1;
                    if !w.stuck {
                        tracing::warn!(
                            uuid = %w.identity.uuid,
                            timeout = ?self.opts.gpu_timeout,
                            "GPU did not answer in time (a hung NVML call); reported down until it does"
                        );
                        w.stuck = true;
                    }
                    device::down(&w.identity)
                }
            };
            if let Some(log) = xids.get(&w.identity.uuid) {
                s.xid_counts = log.counts.clone();
                s.last_xid = log.last;
                s.xid_watched = true;
            }
            gpus.push(s);
        }
        let mut errors = self.ledger.errors().clone();
        for w in &self.gpus {
            for (call, n) in &w.errors {
                *errors.entry(call).or_default() += n;
            }
        }
        if self.timeouts > 0 {
            errors.insert("gpu_timeout", self.timeouts);
        }
        NvmlSample {
            driver_version: self.driver_version.clone(),
            gpus,
            errors_by_call: errors,
            success: !failed,
            duration_seconds: started.elapsed().as_secs_f64(),
        }
    }
}

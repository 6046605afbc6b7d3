//! NVML source: everything tessera reads from the GPUs, through nvml-wrapper. Production, tests
//! and the demo all take this path; only the library loaded differs (`--nvml.library`).
//!
//! NVML calls block, so the source lives on the sampler's own thread and is never touched by
//! the async runtime.

mod device;
mod events;
mod gate;
pub mod isolate;
mod ledger;
mod mig;
mod options;
mod process;
mod utilization;
mod worker;

use std::path::Path;
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use worker::GpuWorker;

use nvml_wrapper::error::NvmlError;
use nvml_wrapper::{Device, Nvml};

use crate::log::{LogFormat, LogOptions};
use crate::model::{GpuSample, NvmlSample};
pub use device::clock_event_reasons;
pub use events::XidWatcher;
use ledger::CallLedger;
pub use options::{NvmlArgs, NvmlOptions};
pub use process::read_samples as read_process_utilization;

static NVML: OnceLock<Nvml> = OnceLock::new();

#[derive(Debug, thiserror::Error)]
pub enum NvmlOpenError {
    #[cfg_attr(
        feature = "demo",
        error(
            "NVML library not found ({detail}); on a machine without a GPU try `tessera --demo`"
        )
    )]
    #[cfg_attr(
        not(feature = "demo"),
        error("NVML library not found ({detail}); is the NVIDIA driver installed (in a container: the NVIDIA container toolkit)?")
    )]
    NotFound { detail: String },
    #[error("NVML failed to initialize: {0}")]
    Init(NvmlError),
    #[error("NVML failed to initialize in its worker process: {0}")]
    Worker(String),
}

/// Where NVML runs (`--nvml.isolation`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Isolation {
    /// In worker processes: a fault inside the driver library costs that GPU's samples only.
    Process,
    /// In the exporter's own threads.
    Thread,
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

impl NvmlOptions {
    fn worker_config(&self, role: isolate::Role, log: &LogOptions) -> isolate::WorkerConfig {
        isolate::WorkerConfig {
            role,
            library: self.library.clone(),
            procfs: self.procfs.clone(),
            slow_interval_ms: self.slow_interval.as_millis() as u64,
            process_interval_ms: self.process_interval.as_millis() as u64,
            collect_processes: self.collect_processes,
            collect_mig: self.collect_mig,
            collect_gpm: self.collect_gpm,
            log_level: log.level.to_string(),
            log_json: log.format == LogFormat::Json,
        }
    }

    /// A worker process that stops answering for this long is killed and replaced: long
    /// enough for any call that eventually returns, short enough that a wedged worker does
    /// not keep its GPU dark for good.
    fn hang_limit(&self) -> Duration {
        (self.gpu_timeout * 10).max(Duration::from_secs(5))
    }
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
    collect_gpm: bool,
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
            collect_gpm: true,
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

/// Where the source's NVML calls are made.
enum Backend {
    Thread {
        nvml: &'static Nvml,
        _xids: Option<XidWatcher>,
    },
    Process {
        node: Box<isolate::node::NodeWorker>,
        spawner: isolate::link::Spawner,
        /// The exporter's log, which each worker logs as.
        log: LogOptions,
    },
}

pub struct NvmlSource {
    backend: Backend,
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
    /// A source that calls NVML in this process (`--nvml.isolation=thread`), without XID events.
    pub fn new(nvml: &'static Nvml, opts: NvmlOptions) -> Self {
        let driver_version = nvml.sys_driver_version().unwrap_or_default();
        Self {
            backend: Backend::Thread { nvml, _xids: None },
            opts,
            ledger: CallLedger::default(),
            driver_version,
            gpus: Vec::new(),
            last_slow: None,
            timeouts: 0,
            xids: Arc::default(),
        }
    }

    /// Opens NVML where `opts.isolation` says, with XID events: in thread mode this loads the
    /// library here; in process mode it starts the node worker and waits until NVML is up in
    /// it (a missing library is reported the same way in both). `log`: the exporter's, which
    /// worker processes log as.
    pub fn open(opts: NvmlOptions, log: &LogOptions) -> Result<Self, NvmlOpenError> {
        match opts.isolation {
            Isolation::Thread => {
                let nvml = open(opts.library.as_deref())?;
                let mut source = Self::new(nvml, opts);
                let watcher = XidWatcher::start(nvml, source.xids.clone())
                    .map_err(|e| tracing::warn!(error = %e, "cannot start the XID watcher thread"))
                    .ok();
                source.backend = Backend::Thread {
                    nvml,
                    _xids: watcher,
                };
                Ok(source)
            }
            Isolation::Process => {
                let spawner = isolate::link::Spawner::current()
                    .map_err(|e| NvmlOpenError::Worker(format!("cannot find this program: {e}")))?;
                let node = Box::new(isolate::node::NodeWorker::start(
                    spawner.clone(),
                    opts.worker_config(isolate::Role::Node, log),
                )?);
                Ok(Self {
                    driver_version: node.driver_version.clone(),
                    backend: Backend::Process {
                        node,
                        spawner,
                        log: log.clone(),
                    },
                    opts,
                    ledger: CallLedger::default(),
                    gpus: Vec::new(),
                    last_slow: None,
                    timeouts: 0,
                    xids: Arc::default(),
                })
            }
        }
    }

    fn device_count(&mut self) -> Option<u32> {
        match &mut self.backend {
            Backend::Thread { nvml, .. } => {
                let nvml = *nvml;
                self.ledger
                    .call("node", "device_count", || nvml.device_count())
                    .ok()
            }
            Backend::Process { node, .. } => {
                let count = node.sample(self.opts.gpu_timeout);
                self.driver_version.clone_from(&node.driver_version);
                if let Ok(mut x) = self.xids.lock() {
                    *x = node.xids();
                }
                count
            }
        }
    }

    fn discover(&mut self) {
        let Some(count) = self.device_count() else {
            return;
        };
        if count as usize == self.gpus.len() {
            return;
        }
        tracing::info!(gpus = count, "discovered GPUs");
        let mut gpus = Vec::with_capacity(count as usize);
        if let Backend::Process { spawner, log, .. } = &self.backend {
            for index in 0..count {
                let supervisor = isolate::supervise::GpuSupervisor {
                    index,
                    config: self.opts.worker_config(isolate::Role::Gpu(index), log),
                    spawner: spawner.clone(),
                    hang_limit: self.opts.hang_limit(),
                    restarts: Arc::default(),
                };
                match GpuWorker::spawn_supervisor(supervisor) {
                    Ok(w) => gpus.push(w),
                    Err(e) => {
                        tracing::error!(gpu = index, error = %e, "cannot start the GPU's supervisor thread")
                    }
                }
            }
            self.gpus = gpus;
            return;
        }
        let Backend::Thread { nvml, .. } = &self.backend else {
            return;
        };
        let nvml = *nvml;
        for index in 0..count {
            let key = format!("index:{index}");
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
            match GpuWorker::spawn(nvml, handle, identity, key, self.opts.clone()) {
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
        let mut failed = self.ledger.cycle_failed()
            || matches!(&self.backend, Backend::Process { node, .. } if node.failed);
        let mut gpus = Vec::with_capacity(self.gpus.len());
        for w in &mut self.gpus {
            let (sample, outcome) = w.collect(deadline);
            let mut s = match (sample, outcome) {
                (Some(s), worker::Outcome::Answered { failed: f }) => {
                    failed |= f;
                    if !s.uuid.is_empty() {
                        w.identity = device::identity_of(&s);
                    }
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
                    GpuSample {
                        down_reason: Some("nvml_timeout".into()),
                        ..device::down(&w.identity)
                    }
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
        let mut worker_restarts = Vec::new();
        if let Backend::Process { node, .. } = &self.backend {
            for (call, n) in node.errors() {
                *errors.entry(call).or_default() += n;
            }
            for (reason, n) in &node.restarts {
                worker_restarts.push(("node".to_owned(), *reason, *n));
            }
        }
        for w in &self.gpus {
            for (call, n) in &w.errors {
                *errors.entry(call).or_default() += n;
            }
            let worker = if w.identity.uuid.is_empty() {
                format!("index:{}", w.identity.index)
            } else {
                w.identity.uuid.clone()
            };
            for (reason, n) in w.restarts() {
                worker_restarts.push((worker.clone(), reason, n));
            }
        }
        if self.timeouts > 0 {
            errors.insert("gpu_timeout", self.timeouts);
        }
        NvmlSample {
            driver_version: self.driver_version.clone(),
            gpus,
            errors_by_call: errors,
            worker_restarts,
            success: !failed,
            duration_seconds: started.elapsed().as_secs_f64(),
        }
    }
}

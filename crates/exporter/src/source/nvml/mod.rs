//! NVML source: everything tessera reads from the GPUs, through nvml-wrapper. Production, tests
//! and the demo all take this path; only the library loaded differs (`--nvml.library`).
//!
//! NVML calls block, so the source lives on the sampler's own thread and is never touched by
//! the async runtime.

mod device;
mod events;
mod gate;
pub mod isolate;
mod kept_buffer;
mod ledger;
mod mig;
mod options;
mod process;
mod relay;
mod utilization;
mod worker;

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::sync::OnceLock;
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
    #[error("NVML library not found ({detail}); is the NVIDIA driver installed (in a container: the NVIDIA container toolkit)?")]
    NotFound { detail: String },
    #[error("NVML failed to initialize: {0}")]
    Init(NvmlError),
    #[error("NVML failed to initialize in its worker process: {0}")]
    Worker(String),
}

/// Where NVML runs (`--nvml.isolation`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Isolation {
    /// In a worker process: a fault inside the driver library costs its GPUs a sample, never
    /// the exporter.
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
            gpu_timeout_ms: self.gpu_timeout.as_millis() as u64,
            collect_processes: self.collect_processes,
            collect_mig: self.collect_mig,
            collect_gpm: self.collect_gpm,
            log_level: log.level.to_string(),
            log_json: log.format == LogFormat::Json,
        }
    }

    /// A worker process that stops answering for this long is killed and replaced, and a GPU
    /// whose call has been stuck this long in the node's worker moves to a worker of its own:
    /// long enough for any call that eventually returns, short enough that a wedged call does
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
    utilization: utilization::UtilizationReader,
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
            utilization: utilization::UtilizationReader::default(),
            mig: mig::MigCache::default(),
        }
    }
}

/// Whether a cadence has come round. A tenth of slack keeps a cadence equal to (or a multiple
/// of) the sample interval from slipping a whole cycle when a cycle starts a little early.
fn is_due(last: Option<Instant>, interval: Duration) -> bool {
    last.is_none_or(|t| t.elapsed() >= interval - interval / 10)
}

/// NVML called on this process's threads: `--nvml.isolation=thread`, and the node's worker.
struct Threads {
    nvml: &'static Nvml,
    _xids: Option<XidWatcher>,
    xids: events::Counters,
    /// Node-level calls (device count, handles, identity); per-GPU calls keep their own.
    ledger: CallLedger,
    gpus: Vec<GpuWorker>,
    /// GPUs sampled elsewhere (by a worker of their own), by index.
    except: BTreeSet<u32>,
    device_count: Option<u32>,
    /// The device count the workers were started for: discovery starts over only when NVML
    /// reports another.
    discovered_for: Option<u32>,
    /// GPUs NVML counts but gives no handle to (lost before discovery, or never up), by index,
    /// with when their handle was last asked for: reported down, and asked again now and then
    /// without restarting the other GPUs' workers.
    unreachable: BTreeMap<u32, Instant>,
    timeouts: u64,
}

/// How often a GPU without a handle is asked for one again.
const UNREACHABLE_RETRY: Duration = Duration::from_secs(10);
/// Why a GPU that NVML counts is down when it never gave a handle.
pub const DOWN_NO_HANDLE: &str = "nvml_no_handle";

/// Where the source's NVML calls are made.
enum Backend {
    Threads(Box<Threads>),
    Processes(Box<isolate::backend::Processes>),
}

pub struct NvmlSource {
    backend: Backend,
    opts: NvmlOptions,
    driver_version: String,
    last_slow: Option<Instant>,
}

impl NvmlSource {
    /// A source that calls NVML in this process (`--nvml.isolation=thread`), without XID events.
    pub fn new(nvml: &'static Nvml, opts: NvmlOptions) -> Self {
        Self::on_threads(nvml, opts, BTreeSet::new(), false)
    }

    /// NVML on this process's threads, every GPU but `except`; `xids`: watch XID events.
    fn on_threads(
        nvml: &'static Nvml,
        opts: NvmlOptions,
        except: BTreeSet<u32>,
        xids: bool,
    ) -> Self {
        let counters = events::Counters::default();
        let watcher = if xids {
            XidWatcher::start(nvml, counters.clone())
                .map_err(|e| tracing::warn!(error = %e, "cannot start the XID watcher thread"))
                .ok()
        } else {
            None
        };
        Self {
            driver_version: nvml.sys_driver_version().unwrap_or_default(),
            backend: Backend::Threads(Box::new(Threads {
                nvml,
                _xids: watcher,
                xids: counters,
                ledger: CallLedger::default(),
                gpus: Vec::new(),
                except,
                device_count: None,
                discovered_for: None,
                unreachable: BTreeMap::new(),
                timeouts: 0,
            })),
            opts,
            last_slow: None,
        }
    }

    /// Opens NVML where `opts.isolation` says, with XID events: in thread mode this loads the
    /// library here; in process mode it starts the node's worker and waits until NVML is up in
    /// it (a missing library is reported the same way in both). `log`: the exporter's, which
    /// worker processes log as.
    pub fn open(opts: NvmlOptions, log: &LogOptions) -> Result<Self, NvmlOpenError> {
        match opts.isolation {
            Isolation::Thread => {
                let nvml = open(opts.library.as_deref())?;
                Ok(Self::on_threads(nvml, opts, BTreeSet::new(), true))
            }
            Isolation::Process => {
                let processes = isolate::backend::Processes::start(&opts, log)?;
                Ok(Self {
                    driver_version: processes.driver_version().to_owned(),
                    backend: Backend::Processes(Box::new(processes)),
                    opts,
                    last_slow: None,
                })
            }
        }
    }

    /// One sample of every GPU. Never fails as a whole: a GPU that fails is reported down.
    pub fn sample(&mut self) -> NvmlSample {
        let slow_due = is_due(self.last_slow, self.opts.slow_interval);
        if slow_due {
            self.last_slow = Some(Instant::now());
        }
        self.sample_due(slow_due)
    }

    /// One sample, the slow calls made when `slow_due` (the exporter keeps their cadence, also
    /// for its workers).
    fn sample_due(&mut self, slow_due: bool) -> NvmlSample {
        let started = Instant::now();
        let mut sample = match &mut self.backend {
            Backend::Threads(t) => t.sample(&self.opts, slow_due),
            Backend::Processes(p) => p.sample(&self.opts, slow_due),
        };
        if let Backend::Processes(p) = &self.backend {
            p.driver_version().clone_into(&mut self.driver_version);
        }
        sample.driver_version.clone_from(&self.driver_version);
        sample.duration_seconds = started.elapsed().as_secs_f64();
        sample
    }
}

impl NvmlSource {
    /// One sample as the node's worker answers it (the source runs on threads there).
    fn node_reply(&mut self, slow_due: bool) -> isolate::protocol::NodeReply {
        let sample = self.sample_due(slow_due);
        let Backend::Threads(t) = &self.backend else {
            return isolate::protocol::NodeReply::default();
        };
        isolate::protocol::NodeReply {
            device_count: t.device_count,
            gpus: sample.gpus,
            errors: isolate::as_text(&sample.errors_by_call),
            costs: isolate::as_text(&sample.call_costs),
            xids: t
                .xids
                .lock()
                .map(|m| m.clone().into_iter().collect())
                .unwrap_or_default(),
            failed: !sample.success,
            stuck: t.stuck(),
        }
    }
}

impl Threads {
    fn discover(&mut self, opts: &NvmlOptions) {
        let nvml = self.nvml;
        self.device_count = self
            .ledger
            .call("node", "device_count", || nvml.device_count())
            .ok();
        let Some(count) = self.device_count else {
            return;
        };
        if self.discovered_for == Some(count) {
            self.retry_unreachable(opts);
            return;
        }
        let ours: Vec<u32> = (0..count).filter(|i| !self.except.contains(i)).collect();
        // Dropping the old workers closes their channels; each thread ends after its call.
        self.gpus = Vec::with_capacity(ours.len());
        self.unreachable.clear();
        for index in ours {
            if let Some(w) = self.start_worker(index, opts) {
                self.gpus.push(w);
            }
        }
        self.discovered_for = Some(count);
        let unreachable: Vec<u32> = self.unreachable.keys().copied().collect();
        if unreachable.is_empty() {
            tracing::info!(gpus = count, "discovered GPUs");
        } else {
            tracing::warn!(
                gpus = count,
                ?unreachable,
                "discovered GPUs; NVML gives no handle to some, reported down"
            );
        }
    }

    /// Asks again for the handles NVML refused, each at most every [`UNREACHABLE_RETRY`].
    fn retry_unreachable(&mut self, opts: &NvmlOptions) {
        let due: Vec<u32> = self
            .unreachable
            .iter()
            .filter(|(_, asked)| asked.elapsed() >= UNREACHABLE_RETRY)
            .map(|(i, _)| *i)
            .collect();
        for index in due {
            if let Some(w) = self.start_worker(index, opts) {
                self.unreachable.remove(&index);
                tracing::info!(gpu = index, "GPU gives a handle now; sampling it");
                self.gpus.push(w);
                self.gpus.sort_by_key(|w| w.identity.index);
            }
        }
    }

    /// The GPU's sampling thread, or `None` (and the GPU marked unreachable) without a handle.
    fn start_worker(&mut self, index: u32, opts: &NvmlOptions) -> Option<GpuWorker> {
        let nvml = self.nvml;
        let key = format!("index:{index}");
        let Some(handle) = self
            .ledger
            .call(&key, "device_by_index", || nvml.device_by_index(index))
            .ok()
        else {
            self.unreachable.insert(index, Instant::now());
            return None;
        };
        let identity = device::identity(&mut self.ledger, &key, index, &handle);
        let key = if identity.uuid.is_empty() {
            key
        } else {
            identity.uuid.clone()
        };
        match GpuWorker::spawn(nvml, handle, identity, key, opts.clone()) {
            Ok(w) => Some(w),
            Err(e) => {
                tracing::error!(gpu = index, error = %e, "cannot start the GPU's sampling thread");
                self.unreachable.insert(index, Instant::now());
                None
            }
        }
    }

    fn sample(&mut self, opts: &NvmlOptions, slow_due: bool) -> NvmlSample {
        self.ledger.begin_cycle();
        self.discover(opts);
        let xids = self.xids.lock().map(|m| m.clone()).unwrap_or_default();
        for w in &mut self.gpus {
            w.request(slow_due);
        }
        // GPUs answer in parallel; one deadline bounds the whole cycle.
        let deadline = Instant::now() + opts.gpu_timeout;
        let mut failed = self.ledger.cycle_failed();
        let mut gpus = Vec::with_capacity(self.gpus.len());
        for w in &mut self.gpus {
            let (mut s, outcome) = w.sample_or_down(deadline, opts.gpu_timeout);
            match outcome {
                worker::Outcome::Answered { failed: f } => failed |= f,
                worker::Outcome::Late => {
                    failed = true;
                    self.timeouts += 1;
                }
            }
            if let Some(log) = xids.get(&s.uuid) {
                s.xid_counts = log.counts.clone();
                s.last_xid = log.last;
                s.xid_watched = true;
            }
            gpus.push(s);
        }
        if !self.unreachable.is_empty() {
            gpus.extend(self.unreachable.keys().map(|&index| GpuSample {
                index,
                up: false,
                down_reason: Some(DOWN_NO_HANDLE.into()),
                ..Default::default()
            }));
            gpus.sort_by_key(|s| s.index);
        }
        let mut errors = self.ledger.errors().clone();
        let mut costs = self.ledger.costs().clone();
        for w in &self.gpus {
            for (call, n) in &w.errors {
                *errors.entry(call).or_default() += n;
            }
            for (call, c) in &w.costs {
                *costs.entry(call).or_default() += *c;
            }
        }
        if self.timeouts > 0 {
            *errors.entry("gpu_timeout").or_default() += self.timeouts;
        }
        NvmlSample {
            driver_version: String::new(),
            gpus,
            errors_by_call: errors,
            worker_restarts: Vec::new(),
            call_costs: costs,
            success: !failed,
            duration_seconds: 0.0,
        }
    }

    /// GPUs whose call has been stuck past a deadline, and for how long.
    fn stuck(&self) -> Vec<(u32, f64)> {
        self.gpus
            .iter()
            .filter_map(|w| Some((w.identity.index, w.stuck_for()?.as_secs_f64())))
            .collect()
    }
}

//! The single writer: on its own thread (NVML blocks), it samples, joins, encodes once and
//! swaps in the new snapshot. Scrapes only ever read what was published.

use std::sync::mpsc::{Receiver, RecvTimeoutError};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use axum::body::Bytes;
use tokio::sync::watch;

use std::collections::{HashMap, HashSet};

use crate::log::LogOptions;
use crate::metrics::{self, EncodeOptions};
use crate::model::compute::{complete_idle_timelines, ActivityInputs};
use crate::model::device_id::ResourceMatcher;
use crate::model::join::{join, JoinInputs};
use crate::model::records;
use crate::model::{CollectorStatus, NvmlSample, Snapshot};
use crate::options::{parse_duration, parse_positive_duration, Resolver};
use crate::source::cgroup::{read_process_cgroup, CgroupError, CgroupIdentity};
use crate::source::cpu::CpuTracker;
use crate::source::kube::ClusterView;
use crate::source::nvml::{NvmlOptions, NvmlSource};
use crate::source::podresources::Allocations;
use crate::source::probe::ProbeBook;
use crate::source::SourceState;

/// What a scrape serves: the snapshot and its exposition, made together.
#[derive(Debug)]
pub struct Published {
    pub snapshot: Arc<Snapshot>,
    pub exposition: Bytes,
    /// The exposition gzipped, made by the first scrape that asks for it (Prometheus always
    /// does) and shared by every scrape of this sample, so a sample is compressed at most once
    /// and only when someone wants it.
    pub gzipped: tokio::sync::OnceCell<Bytes>,
    /// The dcgm-exporter-compatible families alone, for `--web.dcgm-listen-address`.
    pub dcgm: Option<Bytes>,
    pub dcgm_gzipped: tokio::sync::OnceCell<Bytes>,
}

pub type PublishedRx = watch::Receiver<Option<Arc<Published>>>;

/// What the sampler runs with: its own options and those of what it drives.
#[derive(Debug, Clone)]
pub struct SamplerConfig {
    pub sample: SampleOptions,
    /// The `node` label.
    pub node: String,
    pub nvml: NvmlOptions,
    /// The exporter's log, which NVML's worker processes log as.
    pub log: LogOptions,
    pub encode: EncodeOptions,
    pub resources: ResourceMatcher,
}

/// The sampler's flags: its cadence and the trailing window activity is measured over.
#[derive(Debug, Default, clap::Args)]
pub struct SampleArgs {
    /// How often to sample NVML and rebuild the snapshot [default: 1s].
    #[arg(long = "sample.interval", env = "TESSERA_SAMPLE_INTERVAL")]
    pub sample_interval: Option<String>,
    /// Trailing window over which process CPU time and probe busy time are measured [default: 5s].
    #[arg(long = "activity.window", env = "TESSERA_ACTIVITY_WINDOW")]
    pub activity_window: Option<String>,
    /// How long a GPU must read idle for its power over that time to teach its idle floor, the part of its energy split by holding rather than use (docs/energy.md) [default: 30s].
    #[arg(long = "energy.floor-window", env = "TESSERA_ENERGY_FLOOR_WINDOW")]
    pub energy_floor_window: Option<String>,
}

/// The sampler's resolved options.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SampleOptions {
    pub interval: Duration,
    /// Trailing window over which CPU time and probe busy time are compared.
    pub activity_window: Duration,
    /// Idle time over which a GPU's idle floor is learned.
    pub energy_floor_window: Duration,
}

impl SampleArgs {
    pub fn resolve(&self, r: &mut Resolver) -> SampleOptions {
        SampleOptions {
            interval: self.interval(r),
            activity_window: self.activity_window(r),
            energy_floor_window: self.energy_floor_window(r),
        }
    }

    fn interval(&self, r: &mut Resolver) -> Duration {
        r.get(
            "sample.interval",
            &self.sample_interval,
            Duration::from_secs(1),
            parse_positive_duration,
        )
    }

    fn energy_floor_window(&self, r: &mut Resolver) -> Duration {
        r.get(
            "energy.floor-window",
            &self.energy_floor_window,
            Duration::from_secs(30),
            |s| {
                let d = parse_duration(s)?;
                if d < Duration::from_secs(2) {
                    Err("must be at least 2s: a median needs several power readings".into())
                } else {
                    Ok(d)
                }
            },
        )
    }

    fn activity_window(&self, r: &mut Resolver) -> Duration {
        r.get(
            "activity.window",
            &self.activity_window,
            Duration::from_secs(5),
            |s| {
                let d = parse_duration(s)?;
                if d < Duration::from_secs(2) {
                    Err("must be at least 2s: CPU time is counted in 10 ms ticks".into())
                } else {
                    Ok(d)
                }
            },
        )
    }
}

/// The asynchronous sources, read without blocking at each cycle.
#[derive(Default)]
pub struct Feeds {
    pub pod_resources: Option<watch::Receiver<SourceState<Allocations>>>,
    pub kube: Option<watch::Receiver<SourceState<ClusterView>>>,
    /// The CUDA probe's reports, when `--probe.socket` is set.
    pub probe: Option<ProbeBook>,
}

/// Each process's cgroup, read once per pid and dropped when the pid leaves the GPUs.
#[derive(Default)]
struct CgroupCache {
    by_pid: HashMap<u32, CgroupIdentity>,
    unreadable: HashSet<u32>,
}

impl CgroupCache {
    /// Returns whether every read that mattered succeeded.
    fn refresh(&mut self, procfs: &std::path::Path, sample: &NvmlSample) -> bool {
        let pids: HashSet<u32> = sample
            .gpus
            .iter()
            .flat_map(|g| g.processes.iter().map(|p| p.pid))
            .collect();
        self.by_pid.retain(|pid, _| pids.contains(pid));
        self.unreadable.retain(|pid| pids.contains(pid));
        let mut ok = true;
        for pid in pids {
            if self.by_pid.contains_key(&pid) || self.unreadable.contains(&pid) {
                continue;
            }
            match read_process_cgroup(procfs, pid) {
                Ok(Some(id)) => {
                    self.by_pid.insert(pid, id);
                }
                // Not in a container, or gone between NVML's list and now: nothing to attribute.
                Ok(None) | Err(CgroupError::NotFound { .. }) => {
                    self.unreadable.insert(pid);
                }
                Err(e) => {
                    tracing::debug!(pid, error = %e, "cannot read the process cgroup");
                    self.unreadable.insert(pid);
                    ok = false;
                }
            }
        }
        ok
    }
}

fn state_of<T>(rx: &Option<watch::Receiver<SourceState<T>>>) -> Option<SourceState<T>> {
    rx.as_ref().map(|r| r.borrow().clone())
}

pub struct Sampler {
    cfg: SamplerConfig,
    source: Option<NvmlSource>,
    tx: watch::Sender<Option<Arc<Published>>>,
    feeds: Feeds,
    cgroups: CgroupCache,
    cpu: CpuTracker,
    previous: Option<Arc<Snapshot>>,
    last_cycle_seconds: f64,
    /// When NVML fails to initialize, the next attempt is due at this time.
    retry_at: Instant,
    retry_backoff: Duration,
    init_failed_logged: bool,
}

const MAX_INIT_BACKOFF: Duration = Duration::from_secs(30);

impl Sampler {
    pub fn new(
        cfg: SamplerConfig,
        feeds: Feeds,
        tx: watch::Sender<Option<Arc<Published>>>,
    ) -> Self {
        Self {
            cpu: CpuTracker::new(cfg.sample.activity_window),
            cfg,
            source: None,
            tx,
            feeds,
            cgroups: CgroupCache::default(),
            previous: None,
            last_cycle_seconds: 0.0,
            retry_at: Instant::now(),
            retry_backoff: Duration::from_secs(1),
            init_failed_logged: false,
        }
    }

    /// Starts with a source already opened (main opens one up front to report a missing NVML
    /// library before serving).
    pub fn adopt(&mut self, source: NvmlSource) {
        self.source = Some(source);
    }

    fn ensure_source(&mut self) -> bool {
        if self.source.is_some() {
            return true;
        }
        if Instant::now() < self.retry_at {
            return false;
        }
        match NvmlSource::open(self.cfg.nvml.clone(), &self.cfg.log) {
            Ok(source) => {
                tracing::info!("NVML initialized");
                self.source = Some(source);
                true
            }
            Err(e) => {
                if !self.init_failed_logged {
                    tracing::warn!(error = %e, "NVML is not usable yet; retrying with backoff");
                    self.init_failed_logged = true;
                }
                self.retry_at = Instant::now() + self.retry_backoff;
                self.retry_backoff = (self.retry_backoff * 2).min(MAX_INIT_BACKOFF);
                false
            }
        }
    }

    /// One cycle: sample, join, encode, publish.
    pub fn cycle(&mut self) {
        let started = Instant::now();
        if !self.ensure_source() {
            return;
        }
        let Some(source) = self.source.as_mut() else {
            return;
        };
        let sample = source.sample();
        let timestamp_seconds = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| d.as_secs_f64())
            .unwrap_or_default();
        let mut collectors = vec![CollectorStatus {
            name: "nvml",
            success: sample.success,
            duration_seconds: sample.duration_seconds,
        }];
        let cgroup_started = Instant::now();
        let cgroups_ok = self.cgroups.refresh(&self.cfg.nvml.procfs, &sample);
        collectors.push(CollectorStatus {
            name: "cgroup",
            success: cgroups_ok,
            duration_seconds: cgroup_started.elapsed().as_secs_f64(),
        });
        let now = Instant::now();
        let pids: Vec<u32> = {
            let mut p: Vec<u32> = sample
                .gpus
                .iter()
                .flat_map(|g| g.processes.iter().map(|p| p.pid))
                .collect();
            p.sort_unstable();
            p.dedup();
            p
        };
        if let Some(book) = &self.feeds.probe {
            let grace =
                crate::source::probe::UNLISTED_GRACE.max(self.cfg.nvml.process_interval * 2);
            book.settle_unlisted(&pids, now, grace);
        }
        let mut activity = ActivityInputs {
            cpu_cores: self.cpu.refresh(&self.cfg.nvml.procfs, &pids, now),
            probe: self
                .feeds
                .probe
                .as_ref()
                .map(|b| b.readings(&pids, now))
                .unwrap_or_default(),
            probe_timelines: self
                .feeds
                .probe
                .as_ref()
                .map(|b| b.timelines(&pids, now))
                .unwrap_or_default(),
            window_seconds: self.cfg.sample.activity_window.as_secs_f64(),
            timeline_lag_seconds: self
                .feeds
                .probe
                .as_ref()
                .map_or(0.0, |_| crate::source::probe::TIMELINE_LAG.as_secs_f64()),
        };
        complete_idle_timelines(&mut activity);
        if let Some(book) = &self.feeds.probe {
            // Records only where they buy something: processes alone on their device keep
            // NVML's figure and pay nothing (model::records).
            book.set_shared(&records::shared_processes(&sample, &activity), now);
        }
        let pod_resources = state_of(&self.feeds.pod_resources);
        let kube = state_of(&self.feeds.kube);
        for (name, healthy) in [
            ("podresources", pod_resources.as_ref().map(|s| s.healthy)),
            ("kube", kube.as_ref().map(|s| s.healthy)),
        ] {
            if let Some(success) = healthy {
                // These sources poll on their own cadence; their cost is not on this thread.
                collectors.push(CollectorStatus {
                    name,
                    success,
                    duration_seconds: 0.0,
                });
            }
        }
        let mut snapshot = join(JoinInputs {
            node: &self.cfg.node,
            timestamp_seconds,
            nvml: &sample,
            collectors,
            sample_duration_seconds: self.last_cycle_seconds,
            allocations: pod_resources.as_ref().and_then(|s| s.data.as_deref()),
            cluster: kube.as_ref().and_then(|s| s.data.as_deref()),
            cgroups: &self.cgroups.by_pid,
            resources: &self.cfg.resources,
            activity: &activity,
            previous: self.previous.as_deref(),
            energy_floor_window: self.cfg.sample.energy_floor_window.as_secs_f64(),
        });
        if let Some(book) = &self.feeds.probe {
            snapshot.probe_reports_refused = book.refused();
        }
        let exposition = metrics::encode(&snapshot, &self.cfg.encode);
        let snapshot = Arc::new(snapshot);
        self.previous = Some(snapshot.clone());
        self.tx.send_replace(Some(Arc::new(Published {
            snapshot,
            exposition: Bytes::from(exposition.text),
            gzipped: tokio::sync::OnceCell::new(),
            dcgm: exposition.dcgm.map(|d| Bytes::from(d.text)),
            dcgm_gzipped: tokio::sync::OnceCell::new(),
        })));
        self.last_cycle_seconds = started.elapsed().as_secs_f64();
    }

    /// Runs until `stop` receives a message or its sender is dropped.
    pub fn spawn(mut self, stop: Receiver<()>) -> std::io::Result<JoinHandle<()>> {
        std::thread::Builder::new()
            .name("tessera-sampler".into())
            .spawn(move || {
                let mut next = Instant::now();
                loop {
                    self.cycle();
                    next += self.cfg.sample.interval;
                    let now = Instant::now();
                    if next < now {
                        // Fell behind (a slow cycle): skip the missed ticks instead of bursting.
                        next = now + self.cfg.sample.interval;
                    }
                    match stop.recv_timeout(next - now) {
                        Err(RecvTimeoutError::Timeout) => {}
                        _ => return,
                    }
                }
            })
    }
}

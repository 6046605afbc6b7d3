//! The single writer: on its own thread (NVML blocks), it samples, joins, encodes once and
//! swaps in the new snapshot. Scrapes only ever read what was published.

use std::path::PathBuf;
use std::sync::mpsc::{Receiver, RecvTimeoutError};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use axum::body::Bytes;
use tokio::sync::watch;

use crate::metrics::{self, EncodeOptions};
use crate::model::join::{join, JoinInputs};
use crate::model::{CollectorStatus, Snapshot};
use crate::source::nvml::{self, NvmlOptions, NvmlSource, XidWatcher};

/// What a scrape serves: the snapshot and its exposition, made together.
#[derive(Debug)]
pub struct Published {
    pub snapshot: Arc<Snapshot>,
    pub exposition: Bytes,
    pub series: usize,
}

pub type PublishedRx = watch::Receiver<Option<Arc<Published>>>;

#[derive(Debug, Clone)]
pub struct SamplerConfig {
    pub interval: Duration,
    pub node: String,
    pub nvml_library: Option<PathBuf>,
    pub nvml: NvmlOptions,
    pub encode: EncodeOptions,
}

pub struct Sampler {
    cfg: SamplerConfig,
    source: Option<NvmlSource>,
    _xids: Option<XidWatcher>,
    tx: watch::Sender<Option<Arc<Published>>>,
    /// When NVML fails to initialize, the next attempt is due at this time.
    retry_at: Instant,
    retry_backoff: Duration,
    init_failed_logged: bool,
}

const MAX_INIT_BACKOFF: Duration = Duration::from_secs(30);

impl Sampler {
    pub fn new(cfg: SamplerConfig, tx: watch::Sender<Option<Arc<Published>>>) -> Self {
        Self {
            cfg,
            source: None,
            _xids: None,
            tx,
            retry_at: Instant::now(),
            retry_backoff: Duration::from_secs(1),
            init_failed_logged: false,
        }
    }

    fn ensure_source(&mut self) -> bool {
        if self.source.is_some() {
            return true;
        }
        if Instant::now() < self.retry_at {
            return false;
        }
        match nvml::open(self.cfg.nvml_library.as_deref()) {
            Ok(lib) => {
                let source = NvmlSource::new(lib, self.cfg.nvml.clone());
                self._xids = XidWatcher::start(lib, source.xid_counters())
                    .map_err(|e| tracing::warn!(error = %e, "cannot start the XID watcher thread"))
                    .ok();
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
        let collectors = vec![CollectorStatus {
            name: "nvml",
            success: sample.success,
            duration_seconds: sample.duration_seconds,
        }];
        let snapshot = join(JoinInputs {
            node: &self.cfg.node,
            timestamp_seconds,
            nvml: &sample,
            collectors,
        });
        let exposition = metrics::encode(&snapshot, &self.cfg.encode);
        self.tx.send_replace(Some(Arc::new(Published {
            snapshot: Arc::new(snapshot),
            series: exposition.series,
            exposition: Bytes::from(exposition.text),
        })));
    }

    /// Runs until `stop` receives a message or its sender is dropped.
    pub fn spawn(mut self, stop: Receiver<()>) -> std::io::Result<JoinHandle<()>> {
        std::thread::Builder::new().name("tessera-sampler".into()).spawn(move || {
            let mut next = Instant::now();
            loop {
                self.cycle();
                next += self.cfg.interval;
                let now = Instant::now();
                if next < now {
                    // Fell behind (a slow cycle): skip the missed ticks instead of bursting.
                    next = now + self.cfg.interval;
                }
                match stop.recv_timeout(next - now) {
                    Err(RecvTimeoutError::Timeout) => {}
                    _ => return,
                }
            }
        })
    }
}

//! The node worker: device count, driver version and XID events, asked once per sample from
//! the sampler's thread. It is restarted like a GPU's worker; its XID counters and failed-call
//! counts carry on across restarts.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use super::super::events::XidLog;
use super::super::NvmlOpenError;
use super::link::{Link, Lost, Spawner};
use super::supervise::START_LIMIT;
use super::{intern, restart_reason, CarriedCounts, Message, Request, WorkerConfig};

pub struct NodeWorker {
    config: WorkerConfig,
    spawner: Spawner,
    link: Option<Link>,
    pub driver_version: String,
    errors: CarriedCounts<&'static str>,
    xids: BTreeMap<String, (CarriedCounts<u32>, Option<u32>)>,
    pub restarts: BTreeMap<&'static str, u64>,
    /// Whether the last node-wide sample had a failing call (or no answer).
    pub failed: bool,
    failures_in_a_row: u32,
    retry_at: Instant,
}

fn start(spawner: &Spawner, config: &WorkerConfig) -> Result<(Link, String), NvmlOpenError> {
    let mut link = Link::spawn(spawner, config).map_err(|e| NvmlOpenError::Worker(e.describe()))?;
    match link.recv(START_LIMIT) {
        Ok(Message::NodeReady { driver_version }) => Ok((link, driver_version)),
        Ok(Message::InitFailed { not_found, message }) => {
            link.kill();
            Err(if not_found {
                NvmlOpenError::NotFound { detail: message }
            } else {
                NvmlOpenError::Worker(message)
            })
        }
        Ok(other) => {
            link.kill();
            Err(NvmlOpenError::Worker(format!(
                "unexpected first answer from the NVML worker: {other:?}"
            )))
        }
        Err(lost) => Err(NvmlOpenError::Worker(format!(
            "the NVML worker {}",
            lost.describe()
        ))),
    }
}

impl NodeWorker {
    /// Starts the node worker and waits until NVML is up in it.
    pub fn start(spawner: Spawner, config: WorkerConfig) -> Result<NodeWorker, NvmlOpenError> {
        let (link, driver_version) = start(&spawner, &config)?;
        Ok(NodeWorker {
            config,
            spawner,
            link: Some(link),
            driver_version,
            errors: CarriedCounts::default(),
            xids: BTreeMap::new(),
            restarts: BTreeMap::new(),
            failed: false,
            failures_in_a_row: 0,
            retry_at: Instant::now(),
        })
    }

    fn lose(&mut self, lost: Lost) {
        self.link = None;
        self.errors.worker_died();
        for (counts, _) in self.xids.values_mut() {
            counts.worker_died();
        }
        let reason = restart_reason(lost.status(), matches!(lost, Lost::Hung));
        *self.restarts.entry(reason).or_default() += 1;
        self.failures_in_a_row += 1;
        let wait = if self.failures_in_a_row > 1 {
            Duration::from_secs(1 << (self.failures_in_a_row - 2).min(5))
        } else {
            Duration::ZERO
        };
        self.retry_at = Instant::now() + wait;
        tracing::error!(reason, "NVML node worker {}; restarting", lost.describe());
    }

    /// The device count this sample, or `None` when the node worker cannot say (it died, or is
    /// being restarted): the sampler then keeps the GPUs it knows.
    pub fn sample(&mut self, limit: Duration) -> Option<u32> {
        self.failed = true;
        if self.link.is_none() {
            if Instant::now() < self.retry_at {
                return None;
            }
            match start(&self.spawner, &self.config) {
                Ok((link, driver_version)) => {
                    self.link = Some(link);
                    self.driver_version = driver_version;
                }
                Err(e) => {
                    self.lose(Lost::Died {
                        status: None,
                        note: Some(("start".into(), e.to_string())),
                    });
                    return None;
                }
            }
        }
        let link = self.link.as_mut()?;
        let answer = link
            .send(&Request { slow_due: false })
            .and_then(|()| link.recv(limit));
        match answer {
            Ok(Message::Node {
                device_count,
                xids,
                errors,
                failed,
            }) => {
                self.failures_in_a_row = 0;
                self.failed = failed;
                self.errors
                    .update(errors.iter().map(|(k, v)| (intern(k), *v)).collect());
                for (uuid, log) in xids {
                    let entry = self.xids.entry(uuid).or_default();
                    entry.0.update(log.counts);
                    if log.last.is_some() {
                        entry.1 = log.last;
                    }
                }
                device_count
            }
            Ok(other) => {
                if let Some(mut l) = self.link.take() {
                    l.kill();
                }
                self.lose(Lost::Garbled(format!("{other:?}")));
                None
            }
            Err(lost) => {
                self.lose(lost);
                None
            }
        }
    }

    /// XIDs seen since the exporter started, by GPU UUID (kept across node-worker restarts).
    pub fn xids(&self) -> std::collections::HashMap<String, XidLog> {
        self.xids
            .iter()
            .map(|(uuid, (counts, last))| {
                (
                    uuid.clone(),
                    XidLog {
                        counts: counts.totals(),
                        last: *last,
                    },
                )
            })
            .collect()
    }

    pub fn errors(&self) -> BTreeMap<&'static str, u64> {
        self.errors.totals()
    }
}

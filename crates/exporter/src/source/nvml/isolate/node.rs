//! The node's worker seen from the exporter: a supervisor thread keeps it alive and relays the
//! sampler's requests to it. It answers for device count, driver version, XIDs and every GPU
//! that has not moved to a worker of its own; when it dies, its GPUs are answered for as down
//! and it is started again (at once, then with backoff while it keeps dying before answering).
//! Its failed-call and XID counters carry on across restarts.
//!
//! A GPU the loss is pinned on (its thread named in the dying line, or its call stuck past the
//! hang limit, which only killing the worker can free) moves to a worker of its own: the node's
//! worker restarts without it, and the sampler starts a [`super::supervise::GpuSupervisor`] for
//! it. So a GPU that keeps faulting costs the others one sample, once.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::mpsc::{Receiver, RecvTimeoutError, Sender};
use std::time::{Duration, Instant};

use super::super::events::XidLog;
use super::super::NvmlOpenError;
use super::link::{Link, Lost, Spawner};
use super::protocol::NodeReply;
use super::supervise::{DOWN_WORKER_DIED, DOWN_WORKER_STARTING, START_LIMIT};
use super::{restart_reason, CallBooks, CarriedCounts, Message, Request, Role, WorkerConfig};
use crate::model::{CallCost, GpuSample};

/// Longest wait between restarts of a worker that keeps dying before it answers.
const MAX_BACKOFF: Duration = Duration::from_secs(30);

/// One answer of the node's worker, with the counters carried across its restarts.
#[derive(Debug)]
pub struct NodeAnswer {
    pub device_count: Option<u32>,
    pub driver_version: String,
    /// Its GPUs' samples, or why there are none this time (the down reason of its GPUs).
    pub gpus: Result<Vec<GpuSample>, &'static str>,
    /// Failed calls since the exporter started, by call.
    pub errors: BTreeMap<&'static str, u64>,
    /// What each call has cost since the exporter started.
    pub costs: BTreeMap<&'static str, CallCost>,
    /// XIDs since the exporter started, by GPU UUID.
    pub xids: HashMap<String, XidLog>,
    /// Its restarts since the exporter started, by reason.
    pub restarts: BTreeMap<&'static str, u64>,
    pub failed: bool,
    /// GPUs sampled by a worker of their own (never by the node's worker again).
    pub own_workers: BTreeSet<u32>,
}

/// Starts a node worker and waits until NVML is up in it; its driver version with it.
pub fn start(spawner: &Spawner, config: &WorkerConfig) -> Result<(Link, String), NvmlOpenError> {
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

pub struct NodeSupervisor {
    config: WorkerConfig,
    spawner: Spawner,
    /// A worker silent this long is killed; a GPU stuck this long inside it moves out.
    hang_limit: Duration,
    driver_version: String,
    books: CallBooks,
    xids: BTreeMap<String, (CarriedCounts<u32>, Option<u32>)>,
    restarts: BTreeMap<&'static str, u64>,
    own_workers: BTreeSet<u32>,
    device_count: Option<u32>,
}

/// How serving a worker ended; a lost worker's loss is booked (and its GPUs answered for as
/// down) before this returns.
enum Served {
    /// The worker was lost, after answering at least once or not.
    Lost { answered: bool },
    /// A GPU stuck inside it moved out and the worker was killed.
    Moved,
    /// The sampler is gone: stop.
    HungUp,
}

impl NodeSupervisor {
    pub fn new(
        config: WorkerConfig,
        spawner: Spawner,
        hang_limit: Duration,
        driver_version: String,
    ) -> Self {
        let own_workers = match &config.role {
            Role::Node { except } => except.iter().copied().collect(),
            Role::Gpu(_) => BTreeSet::new(),
        };
        NodeSupervisor {
            config,
            spawner,
            hang_limit,
            driver_version,
            books: CallBooks::default(),
            xids: BTreeMap::new(),
            restarts: BTreeMap::new(),
            own_workers,
            device_count: None,
        }
    }

    fn answer(&self, gpus: Result<Vec<GpuSample>, &'static str>, failed: bool) -> NodeAnswer {
        NodeAnswer {
            device_count: self.device_count,
            driver_version: self.driver_version.clone(),
            gpus,
            errors: self.books.errors(),
            costs: self.books.costs(),
            xids: self
                .xids
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
                .collect(),
            restarts: self.restarts.clone(),
            failed,
            own_workers: self.own_workers.clone(),
        }
    }

    /// Relays requests until the sampler hangs up, starting with `link` (already started, so a
    /// missing library was reported by the caller). Each request gets exactly one answer.
    pub fn run(mut self, link: Link, jobs: Receiver<bool>, answers: Sender<NodeAnswer>) {
        let mut link = Some(link);
        let mut failures_in_a_row: u32 = 0;
        loop {
            let started = match link.take() {
                Some(l) => Ok(l),
                None => self.restart(),
            };
            match started {
                Ok(mut l) => match self.serve(&mut l, &jobs, &answers) {
                    Served::Lost { answered } => {
                        if answered {
                            failures_in_a_row = 0;
                        }
                    }
                    Served::Moved => {
                        failures_in_a_row = 0;
                        continue;
                    }
                    Served::HungUp => {
                        // The exporter is stopping; dropping the link kills the worker.
                        tracing::debug!("stopping the NVML worker");
                        return;
                    }
                },
                Err(lost) => self.lose(&lost),
            }
            failures_in_a_row += 1;
            // The first restart is immediate; a worker that keeps dying before it answers is
            // retried ever more slowly, its GPUs answered for as down in the meantime.
            if failures_in_a_row > 1 {
                let wait =
                    Duration::from_secs(1 << (failures_in_a_row - 2).min(5)).min(MAX_BACKOFF);
                if !self.wait_out(wait, &jobs, &answers) {
                    return;
                }
            }
        }
    }

    fn restart(&mut self) -> Result<Link, Lost> {
        self.config.role = Role::Node {
            except: self.own_workers.iter().copied().collect(),
        };
        match start(&self.spawner, &self.config) {
            Ok((link, driver_version)) => {
                self.driver_version = driver_version;
                Ok(link)
            }
            Err(e) => {
                tracing::warn!(error = %e, "the NVML worker could not start");
                Err(Lost::Died {
                    status: None,
                    note: None,
                })
            }
        }
    }

    /// Books a lost worker: its counters carried, the restart counted and logged, and the GPU
    /// it is pinned on (if any) moved to a worker of its own.
    fn lose(&mut self, lost: &Lost) {
        self.books.worker_died();
        for (counts, _) in self.xids.values_mut() {
            counts.worker_died();
        }
        let reason = restart_reason(lost.status(), lost.hung());
        *self.restarts.entry(reason).or_default() += 1;
        let moved = lost.gpu().filter(|g| self.own_workers.insert(*g));
        match moved {
            Some(gpu) => tracing::error!(
                reason,
                gpu,
                "NVML worker {}; GPU {gpu} moves to a worker of its own, and the other GPUs \
                 report down until the restarted worker answers",
                lost.describe()
            ),
            None => tracing::error!(
                reason,
                "NVML worker {}; its GPUs report down until a new one answers",
                lost.describe()
            ),
        }
    }

    /// Answers requests with the GPUs down for `wait`; false when the sampler hung up.
    fn wait_out(
        &self,
        wait: Duration,
        jobs: &Receiver<bool>,
        answers: &Sender<NodeAnswer>,
    ) -> bool {
        let until = Instant::now() + wait;
        loop {
            let left = until.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return true;
            }
            match jobs.recv_timeout(left) {
                Ok(_) => {
                    if answers
                        .send(self.answer(Err(DOWN_WORKER_STARTING), true))
                        .is_err()
                    {
                        return false;
                    }
                }
                Err(RecvTimeoutError::Timeout) => return true,
                Err(RecvTimeoutError::Disconnected) => return false,
            }
        }
    }

    fn take(&mut self, reply: NodeReply) {
        self.device_count = reply.device_count;
        self.books.update(&reply.errors, &reply.costs);
        for (uuid, log) in reply.xids {
            let entry = self.xids.entry(uuid).or_default();
            entry.0.update(log.counts);
            if log.last.is_some() {
                entry.1 = log.last;
            }
        }
    }

    fn serve(
        &mut self,
        link: &mut Link,
        jobs: &Receiver<bool>,
        answers: &Sender<NodeAnswer>,
    ) -> Served {
        let mut answered = false;
        loop {
            let Ok(slow_due) = jobs.recv() else {
                return Served::HungUp;
            };
            let result = link
                .send(&Request { slow_due })
                .and_then(|()| link.recv(self.hang_limit));
            let mut reply = match result {
                Ok(Message::Node(reply)) => *reply,
                other => {
                    let lost = match other {
                        Ok(garbled) => {
                            link.kill();
                            Lost::Garbled(format!("{garbled:?}"))
                        }
                        Err(lost) => lost,
                    };
                    // Booked first, so the sample that shows the GPUs down counts the restart.
                    self.lose(&lost);
                    let _ = answers.send(self.answer(Err(DOWN_WORKER_DIED), true));
                    return Served::Lost { answered };
                }
            };
            answered = true;
            let failed = reply.failed;
            // A call that never returns can only be freed by killing the worker; the GPU that
            // made it moves out, so the restart is paid once.
            let stuck = reply
                .stuck
                .iter()
                .find(|(gpu, seconds)| {
                    *seconds >= self.hang_limit.as_secs_f64() && !self.own_workers.contains(gpu)
                })
                .copied();
            let gpus = std::mem::take(&mut reply.gpus);
            self.take(reply);
            if let Some((gpu, seconds)) = stuck {
                link.kill();
                // Booked before answering, so this answer already names the GPU's own worker.
                // The sample itself is good: every other GPU answered.
                self.lose(&Lost::GpuStuck { gpu, seconds });
                if answers.send(self.answer(Ok(gpus), true)).is_err() {
                    return Served::HungUp;
                }
                return Served::Moved;
            }
            if answers.send(self.answer(Ok(gpus), failed)).is_err() {
                return Served::HungUp;
            }
        }
    }
}

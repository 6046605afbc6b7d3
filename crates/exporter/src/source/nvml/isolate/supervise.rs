//! The supervisor of a GPU with a worker process of its own (one that faulted or hung in the
//! node's worker): a thread of the serving process that keeps the worker alive and relays
//! requests to it. It speaks the same channels as an in-process GPU thread, so the sampler
//! cannot tell them apart, except that a worker which dies is answered for at once (the GPU
//! down, with why) and started again.

use std::sync::mpsc::{Receiver, RecvTimeoutError, Sender};
use std::time::{Duration, Instant};

use super::super::device;
use super::link::{Link, Lost, Spawner};
use super::protocol::{GpuReply as Reply, Restarts};
use super::{restart_reason, CallBooks, Message, Request, WorkerConfig};
use crate::model::GpuSample;

/// How long a new worker may take to load NVML and name its GPU.
pub const START_LIMIT: Duration = Duration::from_secs(30);
/// Longest wait between restarts of a worker that keeps dying.
const MAX_BACKOFF: Duration = Duration::from_secs(30);

/// The reason a GPU is down while its worker is being replaced.
pub const DOWN_WORKER_DIED: &str = "nvml_worker_died";
pub const DOWN_WORKER_STARTING: &str = "nvml_worker_starting";

pub struct GpuSupervisor {
    pub index: u32,
    pub config: WorkerConfig,
    pub spawner: Spawner,
    /// A worker that has not answered a request for this long is killed and replaced.
    pub hang_limit: Duration,
    pub restarts: Restarts,
}

fn down(identity: &GpuSample, reason: &str) -> GpuSample {
    GpuSample {
        down_reason: Some(reason.to_owned()),
        ..device::down(identity)
    }
}

impl GpuSupervisor {
    fn start(&self, identity: &mut GpuSample) -> Result<Link, Lost> {
        let mut link = Link::spawn(&self.spawner, &self.config)?;
        match link.recv(START_LIMIT)? {
            Message::GpuReady { identity: id } => {
                *identity = device::identity_of(&id);
                Ok(link)
            }
            Message::InitFailed { message, .. } => {
                tracing::warn!(gpu = self.index, error = %message, "NVML worker could not start");
                link.kill();
                Err(Lost::Died {
                    status: None,
                    note: None,
                })
            }
            other => {
                link.kill();
                Err(Lost::Garbled(format!("{other:?}")))
            }
        }
    }

    /// Relays requests until the sampler hangs up. Each request gets exactly one reply.
    pub fn run(self, jobs: Receiver<bool>, answers: Sender<Reply>) {
        let mut identity = GpuSample {
            index: self.index,
            ..Default::default()
        };
        let mut books = CallBooks::default();
        let mut failures_in_a_row: u32 = 0;
        loop {
            match self.start(&mut identity) {
                Ok(mut link) => {
                    match self.serve(&mut link, &jobs, &answers, &identity, &mut books) {
                        Served::Lost { answered } => {
                            if answered {
                                failures_in_a_row = 0;
                            }
                        }
                        Served::HungUp => {
                            // The exporter is stopping; dropping the link kills the worker.
                            tracing::debug!(gpu = self.index, "stopping the GPU's NVML worker");
                            return;
                        }
                    }
                }
                Err(lost) => self.book(&lost, &identity, &mut books),
            }
            failures_in_a_row += 1;
            // The first restart is immediate; a worker that keeps dying is retried ever more
            // slowly, its GPU answered for as down in the meantime.
            if failures_in_a_row > 1 {
                let wait =
                    Duration::from_secs(1 << (failures_in_a_row - 2).min(5)).min(MAX_BACKOFF);
                let until = Instant::now() + wait;
                loop {
                    let left = until.saturating_duration_since(Instant::now());
                    if left.is_zero() {
                        break;
                    }
                    match jobs.recv_timeout(left) {
                        Ok(_) => {
                            let reply = Reply {
                                sample: down(&identity, DOWN_WORKER_STARTING),
                                errors: books.errors(),
                                costs: books.costs(),
                                failed: true,
                            };
                            if answers.send(reply).is_err() {
                                return;
                            }
                        }
                        Err(RecvTimeoutError::Timeout) => break,
                        Err(RecvTimeoutError::Disconnected) => return,
                    }
                }
            }
        }
    }

    /// Books a lost worker: what it counted carried, the restart counted and logged.
    fn book(&self, lost: &Lost, identity: &GpuSample, books: &mut CallBooks) {
        books.worker_died();
        let reason = restart_reason(lost.status(), lost.hung());
        *self
            .restarts
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .entry(reason)
            .or_default() += 1;
        tracing::error!(
            gpu = self.index,
            uuid = %identity.uuid,
            reason,
            "NVML worker {}; its GPU reports down until a new one answers",
            lost.describe()
        );
    }

    /// Relays requests to `link` until it is lost (booked, and the request answered for as
    /// down, before this returns) or the sampler hangs up.
    fn serve(
        &self,
        link: &mut Link,
        jobs: &Receiver<bool>,
        answers: &Sender<Reply>,
        identity: &GpuSample,
        books: &mut CallBooks,
    ) -> Served {
        let mut answered = false;
        loop {
            let Ok(slow_due) = jobs.recv() else {
                return Served::HungUp;
            };
            let result = link
                .send(&Request { slow_due })
                .and_then(|()| link.recv(self.hang_limit));
            let reply = match result {
                Ok(Message::Gpu {
                    sample,
                    errors,
                    costs,
                    failed,
                }) => {
                    books.update(&errors, &costs);
                    answered = true;
                    Reply {
                        sample: *sample,
                        errors: books.errors(),
                        costs: books.costs(),
                        failed,
                    }
                }
                other => {
                    let lost = match other {
                        Ok(garbled) => {
                            link.kill();
                            Lost::Garbled(format!("{garbled:?}"))
                        }
                        Err(lost) => lost,
                    };
                    // Booked first, so the sample that shows the GPU down counts the restart.
                    self.book(&lost, identity, books);
                    let _ = answers.send(Reply {
                        sample: down(identity, DOWN_WORKER_DIED),
                        errors: books.errors(),
                        costs: books.costs(),
                        failed: true,
                    });
                    return Served::Lost { answered };
                }
            };
            if answers.send(reply).is_err() {
                return Served::HungUp;
            }
        }
    }
}

/// How serving a worker ended.
enum Served {
    /// The worker was lost, after answering at least once or not.
    Lost { answered: bool },
    /// The sampler is gone: stop.
    HungUp,
}

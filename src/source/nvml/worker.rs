//! One thread per GPU. A driver call that hangs stalls only its own GPU: the cycle waits for
//! each GPU until a deadline, reports a GPU that missed it as down, and asks it again only
//! once its stuck call has returned.

use std::collections::BTreeMap;
use std::sync::mpsc::{channel, Receiver, RecvTimeoutError, Sender, TryRecvError};
use std::time::Instant;

use nvml_wrapper::{Device, Nvml};

use super::ledger::CallLedger;
use super::{device, mig, process, GpuState, NvmlOptions};
use crate::model::GpuSample;

pub struct Reply {
    pub sample: GpuSample,
    /// This GPU's failures per call since start.
    pub errors: BTreeMap<&'static str, u64>,
    pub failed: bool,
}

pub struct GpuWorker {
    pub identity: GpuSample,
    requests: Sender<bool>,
    replies: Receiver<Reply>,
    /// A request is out and not answered yet.
    busy: bool,
    /// Missed the last deadline; logged once per episode.
    pub stuck: bool,
    pub errors: BTreeMap<&'static str, u64>,
}

pub enum Outcome {
    Answered { failed: bool },
    Late,
}

impl GpuWorker {
    pub fn spawn(
        nvml: &'static Nvml,
        handle: Device<'static>,
        identity: GpuSample,
        key: String,
        opts: NvmlOptions,
    ) -> std::io::Result<Self> {
        let (requests, jobs) = channel::<bool>();
        let (answers, replies) = channel();
        let state = GpuState::new(handle, identity.clone(), key);
        std::thread::Builder::new()
            .name(format!("tessera-gpu{}", identity.index))
            .spawn(move || serve(nvml, state, opts, jobs, answers))?;
        Ok(Self {
            identity,
            requests,
            replies,
            busy: false,
            stuck: false,
            errors: BTreeMap::new(),
        })
    }

    /// Asks for a fresh sample unless the previous request is still stuck in the driver. A
    /// late answer to an old request is dropped: it describes the past.
    pub fn request(&mut self, slow_due: bool) {
        if self.busy {
            match self.replies.try_recv() {
                Ok(late) => {
                    self.errors = late.errors;
                    self.busy = false;
                }
                Err(TryRecvError::Empty) => return,
                Err(TryRecvError::Disconnected) => {
                    self.busy = false;
                    return;
                }
            }
        }
        self.busy = self.requests.send(slow_due).is_ok();
    }

    /// Waits until `deadline` for the answer; the sample is `None` when it is late.
    pub fn collect(&mut self, deadline: Instant) -> (Option<GpuSample>, Outcome) {
        if !self.busy {
            return (None, Outcome::Late);
        }
        match self
            .replies
            .recv_timeout(deadline.saturating_duration_since(Instant::now()))
        {
            Ok(reply) => {
                self.busy = false;
                self.errors = reply.errors;
                (
                    Some(reply.sample),
                    Outcome::Answered {
                        failed: reply.failed,
                    },
                )
            }
            Err(RecvTimeoutError::Timeout) | Err(RecvTimeoutError::Disconnected) => {
                (None, Outcome::Late)
            }
        }
    }
}

fn serve(
    nvml: &'static Nvml,
    mut gpu: GpuState,
    opts: NvmlOptions,
    jobs: Receiver<bool>,
    answers: Sender<Reply>,
) {
    let mut ledger = CallLedger::default();
    let mut names = process::NameCache::default();
    while let Ok(slow_due) = jobs.recv() {
        ledger.begin_cycle();
        let mut s = device::sample_gpu(&mut ledger, &mut gpu, slow_due, nvml);
        if s.up && gpu.mig_enabled == Some(true) && opts.collect_mig {
            s.mig_instances = mig::sample_instances(&mut ledger, &mut gpu, nvml);
        }
        if s.up && opts.collect_processes {
            s.processes = process::sample_processes(
                &mut ledger,
                &mut gpu,
                &s.mig_instances,
                &mut names,
                &opts.procfs,
                opts.process_interval,
            );
        }
        if ledger.is_lost(&gpu.key) {
            s = device::down(&gpu.identity);
        }
        names.retain_seen();
        let reply = Reply {
            sample: s,
            errors: ledger.errors().clone(),
            failed: ledger.cycle_failed(),
        };
        if answers.send(reply).is_err() {
            return;
        }
    }
}

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
    /// Restarts of this GPU's worker process, by reason (empty for a worker thread).
    restarts: super::isolate::supervise::Restarts,
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
        let mut state = GpuState::new(handle, identity.clone(), key);
        state.collect_gpm = opts.collect_gpm;
        std::thread::Builder::new()
            .name(format!("tessera-gpu{}", identity.index))
            .spawn(move || serve(nvml, state, opts, jobs, answers))?;
        Ok(Self::new(identity, requests, replies, Default::default()))
    }

    fn new(
        identity: GpuSample,
        requests: Sender<bool>,
        replies: Receiver<Reply>,
        restarts: super::isolate::supervise::Restarts,
    ) -> Self {
        Self {
            identity,
            requests,
            replies,
            busy: false,
            stuck: false,
            errors: BTreeMap::new(),
            restarts,
        }
    }

    /// A GPU sampled by a worker process, relayed by a supervisor thread.
    pub fn spawn_supervisor(
        supervisor: super::isolate::supervise::GpuSupervisor,
    ) -> std::io::Result<Self> {
        let (requests, jobs) = channel::<bool>();
        let (answers, replies) = channel();
        let identity = GpuSample {
            index: supervisor.index,
            ..Default::default()
        };
        let restarts = supervisor.restarts.clone();
        std::thread::Builder::new()
            .name(format!("tessera-gpu{}", supervisor.index))
            .spawn(move || supervisor.run(jobs, answers))?;
        Ok(Self::new(identity, requests, replies, restarts))
    }

    pub fn restarts(&self) -> Vec<(&'static str, u64)> {
        self.restarts
            .lock()
            .map(|r| r.iter().map(|(k, v)| (*k, *v)).collect())
            .unwrap_or_default()
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
    let mut cycle = CycleState::default();
    while let Ok(slow_due) = jobs.recv() {
        if answers
            .send(sample_once(nvml, &mut gpu, &opts, &mut cycle, slow_due))
            .is_err()
        {
            return;
        }
    }
}

/// What a GPU's sampling keeps between cycles beside [`GpuState`].
#[derive(Default)]
pub struct CycleState {
    ledger: CallLedger,
    names: process::NameCache,
}

impl CycleState {
    pub fn ledger(&mut self) -> &mut CallLedger {
        &mut self.ledger
    }
}

/// One sample of one GPU: the same on a worker thread and in a worker process.
pub fn sample_once(
    nvml: &'static Nvml,
    gpu: &mut GpuState,
    opts: &NvmlOptions,
    cycle: &mut CycleState,
    slow_due: bool,
) -> Reply {
    let ledger = &mut cycle.ledger;
    ledger.begin_cycle();
    let mut s = device::sample_gpu(ledger, gpu, slow_due, nvml);
    if s.up && gpu.mig_enabled == Some(true) && opts.collect_mig {
        s.mig_instances = mig::sample_instances(ledger, gpu, nvml);
    }
    if s.up && opts.collect_processes {
        s.processes = process::sample_processes(
            ledger,
            gpu,
            &s.mig_instances,
            &mut cycle.names,
            &opts.procfs,
            opts.process_interval,
        );
    }
    if ledger.is_lost(&gpu.key) {
        s = device::down(&gpu.identity);
    }
    cycle.names.retain_seen();
    Reply {
        sample: s,
        errors: ledger.errors().clone(),
        failed: ledger.cycle_failed(),
    }
}

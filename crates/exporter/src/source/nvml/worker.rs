//! One thread per GPU. A driver call that hangs stalls only its own GPU: the cycle waits for
//! each GPU until a deadline, reports a GPU that missed it as down, and asks it again only
//! once its stuck call has returned.

use std::collections::BTreeMap;
use std::sync::mpsc::{Receiver, Sender};
use std::time::{Duration, Instant};

use nvml_wrapper::{Device, Nvml};

use super::isolate::crash_note;
use super::isolate::protocol::{GpuReply as Reply, Restarts};
use super::ledger::CallLedger;
use super::relay::{Before, Relay};
use super::utilization::Cadence;
use super::{device, mig, process, GpuState, NvmlOptions};
use crate::model::{CallCost, GpuSample};

/// The reason a GPU is down when its sample missed `--nvml.timeout`.
pub const DOWN_TIMEOUT: &str = "nvml_timeout";

pub struct GpuWorker {
    pub identity: GpuSample,
    relay: Relay<Reply>,
    /// When it first missed a deadline in the current episode (logged once per episode).
    stuck_since: Option<Instant>,
    pub errors: BTreeMap<&'static str, u64>,
    pub costs: BTreeMap<&'static str, CallCost>,
    /// Restarts of this GPU's worker process, by reason (empty for a worker thread).
    restarts: Restarts,
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
        let mut state = GpuState::new(handle, identity.clone(), key);
        state.collect_gpm = opts.collect_gpm;
        let index = identity.index;
        let relay = Relay::spawn(format!("tessera-gpu{index}"), move |jobs, answers| {
            crash_note::set_gpu(index);
            serve(nvml, state, opts, jobs, answers)
        })?;
        Ok(Self::new(identity, relay, Restarts::default()))
    }

    /// A GPU sampled elsewhere (its own worker process): `relay` runs on a thread of its own,
    /// answering each request on `jobs` with exactly one reply.
    pub fn spawn_relay(
        index: u32,
        restarts: Restarts,
        relay: impl FnOnce(Receiver<bool>, Sender<Reply>) + Send + 'static,
    ) -> std::io::Result<Self> {
        let identity = GpuSample {
            index,
            ..Default::default()
        };
        let relay = Relay::spawn(format!("tessera-gpu{index}"), relay)?;
        Ok(Self::new(identity, relay, restarts))
    }

    fn new(identity: GpuSample, relay: Relay<Reply>, restarts: Restarts) -> Self {
        Self {
            identity,
            relay,
            stuck_since: None,
            errors: BTreeMap::new(),
            costs: BTreeMap::new(),
            restarts,
        }
    }

    pub fn restarts(&self) -> Vec<(&'static str, u64)> {
        self.restarts
            .lock()
            .map(|r| r.iter().map(|(k, v)| (*k, *v)).collect())
            .unwrap_or_default()
    }

    /// Asks for a fresh sample unless the previous request is still stuck in the driver. A
    /// late answer to an old request is dropped, its counts kept: it describes the past.
    pub fn request(&mut self, slow_due: bool) {
        if let Before::Late(late) = self.relay.request(slow_due) {
            self.errors = late.errors;
            self.costs = late.costs;
        }
    }

    /// Waits until `deadline` for the answer; the sample is `None` when it is late.
    pub fn collect(&mut self, deadline: Instant) -> (Option<GpuSample>, Outcome) {
        match self.relay.collect(deadline) {
            Some(reply) => {
                self.errors = reply.errors;
                self.costs = reply.costs;
                (
                    Some(reply.sample),
                    Outcome::Answered {
                        failed: reply.failed,
                    },
                )
            }
            None => (None, Outcome::Late),
        }
    }

    /// This cycle's sample, or the GPU's series down when it missed `deadline` (`timeout`
    /// after the request, for the log).
    pub fn sample_or_down(&mut self, deadline: Instant, timeout: Duration) -> (GpuSample, Outcome) {
        match self.collect(deadline) {
            (Some(s), outcome) => {
                if !s.uuid.is_empty() {
                    self.identity = device::identity_of(&s);
                }
                if self.stuck_since.take().is_some() {
                    tracing::info!(uuid = %self.identity.uuid, "GPU answers again");
                }
                (s, outcome)
            }
            (None, _) => {
                if self.stuck_since.is_none() {
                    tracing::warn!(
                        uuid = %self.identity.uuid,
                        ?timeout,
                        "GPU did not answer in time (a hung NVML call); reported down until it does"
                    );
                    self.stuck_since = Some(Instant::now());
                }
                let down = GpuSample {
                    down_reason: Some(DOWN_TIMEOUT.into()),
                    ..device::down(&self.identity)
                };
                (down, Outcome::Late)
            }
        }
    }

    /// How long its call has been stuck, when it is.
    pub fn stuck_for(&self) -> Option<Duration> {
        self.stuck_since.map(|t| t.elapsed())
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
    if s.up {
        // Processes are listed whenever they could hold the GPU; without the list, any cycle
        // might need its own figure.
        let busy = !opts.collect_processes
            || !s.processes.is_empty()
            || !gpu.utilization.last_window_idle();
        let cadence = Cadence {
            now: Instant::now(),
            busy,
        };
        device::sample_activity(ledger, gpu, &mut s, nvml, &cadence);
    }
    if ledger.is_lost(&gpu.key) {
        s = device::down(&gpu.identity);
    }
    cycle.names.retain_seen();
    Reply {
        sample: s,
        errors: ledger.errors().clone(),
        costs: ledger.costs().clone(),
        failed: ledger.cycle_failed(),
    }
}

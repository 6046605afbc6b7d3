//! Process mode as the sampler drives it: one request to the node's worker and one to each GPU
//! with a worker of its own, their answers merged into one sample. A GPU whose worker could not
//! answer keeps its identity's series, down, with the reason.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::time::{Duration, Instant};

use super::super::device;
use super::super::events::XidLog;
use super::super::relay::{Before, Relay};
use super::super::worker::{GpuWorker, Outcome, DOWN_TIMEOUT};
use super::super::{NvmlOpenError, NvmlOptions};
use super::link::Spawner;
use super::node::{NodeAnswer, NodeSupervisor};
use super::supervise::{GpuSupervisor, DOWN_WORKER_STARTING};
use super::Role;
use crate::log::LogOptions;
use crate::model::{CallCost, GpuSample, NvmlSample};

/// The `worker` label of the node's worker in `tessera_nvml_worker_restarts_total`.
const NODE_WORKER: &str = "node";

pub struct Processes {
    node: Relay<NodeAnswer>,
    /// The node worker's counters as of its last answer (carried across its restarts).
    totals: Totals,
    /// GPUs sampled by a worker of their own, by index.
    own: BTreeMap<u32, GpuWorker>,
    /// Every GPU's identity as last seen, for its series while it is down.
    known: BTreeMap<u32, GpuSample>,
    /// When the node's worker first missed a deadline in the current episode.
    node_late_since: Option<Instant>,
    /// GPU samples the node's worker missed the deadline for.
    timeouts: u64,
    spawner: Spawner,
    log: LogOptions,
}

#[derive(Default)]
struct Totals {
    device_count: Option<u32>,
    driver_version: String,
    errors: BTreeMap<&'static str, u64>,
    costs: BTreeMap<&'static str, CallCost>,
    xids: HashMap<String, XidLog>,
    restarts: BTreeMap<&'static str, u64>,
    own_workers: Vec<u32>,
}

impl Totals {
    fn take(&mut self, a: &NodeAnswer) {
        self.device_count = a.device_count.or(self.device_count);
        self.driver_version.clone_from(&a.driver_version);
        self.errors.clone_from(&a.errors);
        self.costs.clone_from(&a.costs);
        self.xids.clone_from(&a.xids);
        self.restarts.clone_from(&a.restarts);
        self.own_workers = a.own_workers.iter().copied().collect();
    }
}

impl Processes {
    /// Starts the node's worker and waits until NVML is up in it.
    pub fn start(opts: &NvmlOptions, log: &LogOptions) -> Result<Self, NvmlOpenError> {
        let spawner = Spawner::current()
            .map_err(|e| NvmlOpenError::Worker(format!("cannot find this program: {e}")))?;
        let config = opts.worker_config(Role::Node { except: Vec::new() }, log);
        let (link, driver_version) = super::node::start(&spawner, &config)?;
        let supervisor = NodeSupervisor::new(
            config,
            spawner.clone(),
            opts.hang_limit(),
            driver_version.clone(),
        );
        let node = Relay::spawn("tessera-nvml-node".into(), move |jobs, answers| {
            supervisor.run(link, jobs, answers)
        })
        .map_err(|e| NvmlOpenError::Worker(format!("cannot start a thread: {e}")))?;
        Ok(Processes {
            node,
            totals: Totals {
                driver_version,
                ..Totals::default()
            },
            own: BTreeMap::new(),
            known: BTreeMap::new(),
            node_late_since: None,
            timeouts: 0,
            spawner,
            log: log.clone(),
        })
    }

    pub fn driver_version(&self) -> &str {
        &self.totals.driver_version
    }

    /// Starts a worker of its own for each GPU the node's worker gave up; returns those started.
    fn start_own_workers(&mut self, opts: &NvmlOptions) -> BTreeSet<u32> {
        let mut started = BTreeSet::new();
        for index in self.totals.own_workers.clone() {
            if self.own.contains_key(&index) {
                continue;
            }
            let supervisor = GpuSupervisor {
                index,
                config: opts.worker_config(Role::Gpu(index), &self.log),
                spawner: self.spawner.clone(),
                hang_limit: opts.hang_limit(),
                restarts: Default::default(),
            };
            let restarts = supervisor.restarts.clone();
            match GpuWorker::spawn_relay(index, restarts, move |jobs, answers| {
                supervisor.run(jobs, answers)
            }) {
                Ok(mut w) => {
                    if let Some(id) = self.known.get(&index) {
                        w.identity = id.clone();
                    }
                    self.own.insert(index, w);
                    started.insert(index);
                }
                Err(e) => {
                    tracing::error!(gpu = index, error = %e, "cannot start the GPU's supervisor thread")
                }
            }
        }
        started
    }

    /// The node worker's GPUs this cycle, or why they are down.
    fn node_gpus(
        &mut self,
        answer: Option<NodeAnswer>,
        timeout: Duration,
    ) -> Result<Vec<GpuSample>, &'static str> {
        let Some(answer) = answer else {
            if self.node_late_since.is_none() {
                tracing::warn!(
                    ?timeout,
                    "the NVML worker did not answer in time; its GPUs report down until it does"
                );
                self.node_late_since = Some(Instant::now());
            }
            return Err(DOWN_TIMEOUT);
        };
        if self.node_late_since.take().is_some() {
            tracing::info!("the NVML worker answers again");
        }
        self.totals.take(&answer);
        answer.gpus
    }

    pub fn sample(&mut self, opts: &NvmlOptions, slow_due: bool) -> NvmlSample {
        if let Before::Late(late) = self.node.request(slow_due) {
            self.totals.take(&late);
        }
        for w in self.own.values_mut() {
            w.request(slow_due);
        }
        let deadline = Instant::now() + opts.gpu_timeout;
        // The node's worker waits up to the timeout for each of its GPUs itself; the margin
        // is for its own node-wide calls and the pipe.
        let answer = self.node.collect(deadline + opts.gpu_timeout / 2);
        let mut failed = answer.as_ref().is_none_or(|a| a.failed);
        let node_gpus = self.node_gpus(answer, opts.gpu_timeout);
        let fresh = self.start_own_workers(opts);

        let mut gpus: BTreeMap<u32, GpuSample> = BTreeMap::new();
        match node_gpus {
            Ok(samples) => {
                for s in samples {
                    if !s.uuid.is_empty() {
                        self.known.insert(s.index, device::identity_of(&s));
                    }
                    gpus.insert(s.index, s);
                }
            }
            Err(reason) => {
                for (index, identity) in &self.known {
                    if self.own.contains_key(index) {
                        continue;
                    }
                    if reason == DOWN_TIMEOUT {
                        self.timeouts += 1;
                    }
                    let down = GpuSample {
                        down_reason: Some(reason.into()),
                        ..device::down(identity)
                    };
                    gpus.insert(*index, down);
                }
            }
        }
        for (index, w) in &mut self.own {
            if fresh.contains(index) {
                // Moved out this cycle and not asked yet: the node's sample of it (down) stands.
                let down = GpuSample {
                    down_reason: Some(DOWN_WORKER_STARTING.into()),
                    ..device::down(&w.identity)
                };
                gpus.entry(*index).or_insert(down);
                continue;
            }
            let (s, outcome) = w.sample_or_down(deadline, opts.gpu_timeout);
            match outcome {
                Outcome::Answered { failed: f } => failed |= f,
                Outcome::Late => {
                    failed = true;
                    self.timeouts += 1;
                }
            }
            if !w.identity.uuid.is_empty() {
                self.known.insert(*index, w.identity.clone());
            }
            gpus.insert(*index, s);
        }
        if let Some(count) = self.totals.device_count {
            gpus.retain(|i, _| *i < count);
            self.known.retain(|i, _| *i < count);
            self.own.retain(|i, _| *i < count);
        }
        for s in gpus.values_mut() {
            if let Some(log) = self.totals.xids.get(&s.uuid) {
                s.xid_counts = log.counts.clone();
                s.last_xid = log.last;
                s.xid_watched = true;
            }
        }

        let mut errors = self.totals.errors.clone();
        let mut costs = self.totals.costs.clone();
        let mut worker_restarts: Vec<(String, &'static str, u64)> = self
            .totals
            .restarts
            .iter()
            .map(|(reason, n)| (NODE_WORKER.to_owned(), *reason, *n))
            .collect();
        for w in self.own.values() {
            for (call, n) in &w.errors {
                *errors.entry(call).or_default() += n;
            }
            for (call, c) in &w.costs {
                *costs.entry(call).or_default() += *c;
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
            *errors.entry("gpu_timeout").or_default() += self.timeouts;
        }
        NvmlSample {
            driver_version: String::new(),
            gpus: gpus.into_values().collect(),
            errors_by_call: errors,
            worker_restarts,
            call_costs: costs,
            success: !failed,
            duration_seconds: 0.0,
        }
    }
}

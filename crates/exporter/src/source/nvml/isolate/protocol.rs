//! What the exporter and its NVML worker processes say to each other, and what a GPU's
//! sampling thread hands the sampler. Both sides of a worker (the process in
//! [`super::child`], its supervisors in [`super::node`] and [`super::supervise`]) and the
//! in-process GPU threads ([`crate::source::nvml`]'s `worker`) speak these types, so none of
//! them imports another.
//!
//! On the wire: one JSON line per message, the worker's stdin and stdout; its stderr is its log.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use serde::{Deserialize, Serialize};

use super::super::events::XidLog;
use crate::model::{CallCost, GpuSample};

/// The argument that turns the binary into a worker; `main.rs` checks for it first.
pub const WORKER_ARG: &str = "__nvml-worker";

/// What a worker is for.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Role {
    /// The node's worker: device count, driver version, XID events, and every GPU but those in
    /// `except` (each sampled by a worker of its own after it faulted or hung here).
    Node { except: Vec<u32> },
    /// Every per-GPU call for the GPU at this NVML index, alone in its process.
    Gpu(u32),
}

/// Everything a worker needs, passed as one JSON argument.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct WorkerConfig {
    pub role: Role,
    pub library: Option<PathBuf>,
    pub procfs: PathBuf,
    pub slow_interval_ms: u64,
    pub process_interval_ms: u64,
    /// How long the node worker waits for each of its GPUs in a sample (`--nvml.timeout`).
    pub gpu_timeout_ms: u64,
    pub collect_processes: bool,
    pub collect_mig: bool,
    pub collect_gpm: bool,
    pub log_level: String,
    pub log_json: bool,
}

/// Supervisor to worker: one line per sample.
#[derive(Debug, Serialize, Deserialize)]
pub struct Request {
    /// The slow calls (energy, MIG mode...) are due: the exporter keeps their cadence, so a
    /// restarted worker does not reset it.
    pub slow_due: bool,
}

/// One sample from the node worker.
#[derive(Debug, Default, Serialize, Deserialize)]
pub struct NodeReply {
    pub device_count: Option<u32>,
    /// The GPUs it samples, by index; a GPU whose thread missed the deadline is down.
    pub gpus: Vec<GpuSample>,
    /// Failed calls since this worker started, by call.
    pub errors: BTreeMap<String, u64>,
    /// What each call has cost since this worker started.
    pub costs: BTreeMap<String, CallCost>,
    /// XIDs since this worker started, by GPU UUID (every GPU, those it does not sample too).
    pub xids: BTreeMap<String, XidLog>,
    pub failed: bool,
    /// GPUs whose sampling thread is stuck in a driver call: (index, seconds since it missed
    /// its first deadline).
    pub stuck: Vec<(u32, f64)>,
}

/// Worker to supervisor.
#[derive(Debug, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Message {
    /// NVML is up in the worker (the first line a node worker writes).
    NodeReady { driver_version: String },
    /// The GPU's identity (the first line a GPU's own worker writes).
    GpuReady { identity: Box<GpuSample> },
    /// NVML could not start; the worker exits after this line.
    InitFailed { not_found: bool, message: String },
    /// One node-wide sample.
    Node(Box<NodeReply>),
    /// One GPU's sample, from its own worker.
    Gpu {
        sample: Box<GpuSample>,
        errors: BTreeMap<String, u64>,
        costs: BTreeMap<String, CallCost>,
        failed: bool,
    },
}

/// A GPU's sample as its sampling thread hands it to the sampler: the same whether the thread
/// calls NVML itself or relays to the GPU's own worker process.
pub struct GpuReply {
    pub sample: GpuSample,
    /// This GPU's failures per call since start.
    pub errors: BTreeMap<&'static str, u64>,
    /// What this GPU's calls have cost since start.
    pub costs: BTreeMap<&'static str, CallCost>,
    pub failed: bool,
}

/// Restarts of one worker by reason, shared with the sampler for the exposition.
pub type Restarts = Arc<Mutex<BTreeMap<&'static str, u64>>>;

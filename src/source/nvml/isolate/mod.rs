//! NVML in worker processes (`--nvml.isolation=process`, the default).
//!
//! NVML is a closed library inside the exporter's address space: a fault in it (a SIGSEGV, an
//! abort) would take every GPU's metrics, `/metrics` itself and the in-memory activity windows
//! with it. So the process that serves HTTP never loads it. Each GPU is sampled by a worker
//! process of its own (this same binary, `tessera __nvml-worker`), and one more worker answers
//! the node-wide calls (device count, driver version, XID events). A worker that dies costs its
//! GPU's samples until it is restarted, at once and then with backoff; its restarts are counted
//! (`tessera_nvml_worker_restarts_total`) and logged with the signal and the NVML call it died
//! in. Everything that must outlive a worker (activity windows, probe state, counters) lives in
//! the serving process; counters a worker kept (failed calls, XIDs) continue from where the dead
//! worker left them, so none goes backwards.
//!
//! Requests and answers are JSON lines on the worker's stdin and stdout; its stderr is the log,
//! forwarded line by line.

pub mod child;
pub mod crash_note;
pub mod link;
pub mod node;
pub mod supervise;

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Mutex;

use serde::{Deserialize, Serialize};

use super::events::XidLog;
use crate::model::GpuSample;

/// The argument that turns the binary into a worker; `main.rs` checks for it first.
pub const WORKER_ARG: &str = "__nvml-worker";

/// What a worker is for.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum Role {
    /// Device count, driver version and XID events for every GPU.
    Node,
    /// Every per-GPU call for the GPU at this NVML index.
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
    pub collect_processes: bool,
    pub collect_mig: bool,
    pub collect_gpm: bool,
    pub log_level: String,
    pub log_json: bool,
}

/// Supervisor to worker: one line per sample.
#[derive(Debug, Serialize, Deserialize)]
pub struct Request {
    pub slow_due: bool,
}

/// Worker to supervisor.
#[derive(Debug, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Message {
    /// NVML is up in the worker (the first line a node worker writes).
    NodeReady { driver_version: String },
    /// The GPU's identity (the first line a GPU worker writes).
    GpuReady { identity: Box<GpuSample> },
    /// NVML could not start; the worker exits after this line.
    InitFailed { not_found: bool, message: String },
    /// One node-wide sample.
    Node {
        device_count: Option<u32>,
        xids: BTreeMap<String, XidLog>,
        errors: BTreeMap<String, u64>,
        failed: bool,
    },
    /// One GPU's sample.
    Gpu {
        sample: Box<GpuSample>,
        errors: BTreeMap<String, u64>,
        failed: bool,
    },
}

/// Call names come back from workers as text; the exposition wants `&'static str`. The set is
/// the calls tessera makes (a few dozen), so each is leaked once; a worker inventing names
/// beyond the cap is folded into `other`.
pub fn intern(name: &str) -> &'static str {
    const CAP: usize = 256;
    static NAMES: Mutex<Vec<&'static str>> = Mutex::new(Vec::new());
    let mut names = NAMES.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(known) = names.iter().find(|n| **n == name) {
        return known;
    }
    if names.len() >= CAP {
        return "other";
    }
    let leaked: &'static str = Box::leak(name.to_owned().into_boxed_str());
    names.push(leaked);
    leaked
}

/// A cumulative counter kept by a worker that may die and start again from zero: the total
/// carries on from the dead worker's last figure, so it never goes backwards.
#[derive(Debug, Default, Clone)]
pub struct CarriedCounts<K: Ord + Clone> {
    carried: BTreeMap<K, u64>,
    current: BTreeMap<K, u64>,
}

impl<K: Ord + Clone> CarriedCounts<K> {
    /// The live worker's counts, as it reports them.
    pub fn update(&mut self, current: BTreeMap<K, u64>) {
        self.current = current;
    }

    /// The worker died: what it had counted is carried into the totals.
    pub fn worker_died(&mut self) {
        for (k, v) in std::mem::take(&mut self.current) {
            *self.carried.entry(k).or_default() += v;
        }
    }

    pub fn totals(&self) -> BTreeMap<K, u64> {
        let mut out = self.carried.clone();
        for (k, v) in &self.current {
            *out.entry(k.clone()).or_default() += v;
        }
        out
    }
}

/// Why a worker was restarted: the label of `tessera_nvml_worker_restarts_total`.
pub fn restart_reason(status: Option<std::process::ExitStatus>, hung: bool) -> &'static str {
    use std::os::unix::process::ExitStatusExt;
    if hung {
        return "hung";
    }
    match status.and_then(|s| s.signal()) {
        Some(libc::SIGSEGV) => "sigsegv",
        Some(libc::SIGABRT) => "sigabrt",
        Some(libc::SIGBUS) => "sigbus",
        Some(libc::SIGILL) => "sigill",
        Some(libc::SIGFPE) => "sigfpe",
        Some(libc::SIGKILL) => "sigkill",
        Some(_) => "signal",
        None => "exit",
    }
}

#[cfg(test)]
mod tests;

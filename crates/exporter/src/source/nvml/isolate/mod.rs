//! NVML in a worker process (`--nvml.isolation=process`, the default).
//!
//! NVML is a closed library inside the exporter's address space: a fault in it (a SIGSEGV, an
//! abort) would take every GPU's metrics, `/metrics` itself and the in-memory activity windows
//! with it. So the process that serves HTTP never loads it. One worker process (this same
//! binary, `tessera __nvml-worker`) samples the node: the node-wide calls (device count, driver
//! version, XID events) and every GPU, each on a thread of its own with the GPM gate between
//! them, exactly as `--nvml.isolation=thread` does in the exporter. A worker that dies costs
//! every GPU it sampled one sample: it is restarted at once (then with backoff), its restarts
//! are counted (`tessera_nvml_worker_restarts_total`) and logged with the signal, the NVML call
//! and the GPU it died in.
//!
//! A GPU that faults there (its thread is named in the dying line) or whose calls stop
//! returning (stuck past the hang limit) moves to a worker of its own, as every GPU had before:
//! from then on its faults cost only itself. So a node whose GPUs never fault pays for one
//! worker, and a GPU that keeps faulting cannot keep the others dark.
//!
//! Everything that must outlive a worker (activity windows, probe state, counters) lives in
//! the serving process; counters a worker kept (failed calls, XIDs) continue from where the dead
//! worker left them, so none goes backwards.

pub mod backend;
pub mod child;
pub mod crash_note;
pub mod link;
pub mod node;
pub mod protocol;
pub mod supervise;

use std::collections::BTreeMap;
use std::sync::Mutex;

use crate::model::CallCost;

pub use protocol::{Message, Request, Role, WorkerConfig, WORKER_ARG};

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
#[derive(Debug, Clone)]
pub struct CarriedCounts<K: Ord + Clone, V = u64> {
    carried: BTreeMap<K, V>,
    current: BTreeMap<K, V>,
}

impl<K: Ord + Clone, V> Default for CarriedCounts<K, V> {
    fn default() -> Self {
        CarriedCounts {
            carried: BTreeMap::new(),
            current: BTreeMap::new(),
        }
    }
}

impl<K: Ord + Clone, V: Copy + Default + std::ops::AddAssign> CarriedCounts<K, V> {
    /// The live worker's counts, as it reports them.
    pub fn update(&mut self, current: BTreeMap<K, V>) {
        self.current = current;
    }

    /// The worker died: what it had counted is carried into the totals.
    pub fn worker_died(&mut self) {
        for (k, v) in std::mem::take(&mut self.current) {
            *self.carried.entry(k).or_default() += v;
        }
    }

    pub fn totals(&self) -> BTreeMap<K, V> {
        let mut out = self.carried.clone();
        for (k, v) in &self.current {
            *out.entry(k.clone()).or_default() += *v;
        }
        out
    }
}

/// What a worker counts per call that must outlive it: failed calls and what calls cost.
#[derive(Debug, Default)]
pub struct CallBooks {
    errors: CarriedCounts<&'static str>,
    costs: CarriedCounts<&'static str, CallCost>,
}

impl CallBooks {
    /// The live worker's figures, as it reports them.
    pub fn update(&mut self, errors: &BTreeMap<String, u64>, costs: &BTreeMap<String, CallCost>) {
        self.errors.update(interned(errors));
        self.costs.update(interned(costs));
    }

    pub fn worker_died(&mut self) {
        self.errors.worker_died();
        self.costs.worker_died();
    }

    pub fn errors(&self) -> BTreeMap<&'static str, u64> {
        self.errors.totals()
    }

    pub fn costs(&self) -> BTreeMap<&'static str, CallCost> {
        self.costs.totals()
    }
}

/// A worker's per-call map, its call names interned.
pub fn interned<V: Copy>(by_call: &BTreeMap<String, V>) -> BTreeMap<&'static str, V> {
    by_call.iter().map(|(k, v)| (intern(k), *v)).collect()
}

/// A per-call map as a worker sends it.
pub fn as_text<V: Copy>(by_call: &BTreeMap<&'static str, V>) -> BTreeMap<String, V> {
    by_call.iter().map(|(k, v)| ((*k).to_owned(), *v)).collect()
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

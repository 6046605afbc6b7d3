//! Processes on a GPU: who they are (pid, name, kind), how much memory they hold, and their
//! share of SM time from NVML's process-utilization samples.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::path::Path;

use nvml_wrapper::enums::device::UsedGpuMemory;
use nvml_wrapper::error::NvmlError;
use nvml_wrapper::struct_wrappers::device::ProcessInfo;
use nvml_wrapper::Device;

use super::ledger::{CallLedger, Outcome};
use super::GpuState;
use crate::model::{MigSample, ProcessKind, ProcessSample};
use crate::source::procfs;

/// The kernel cuts `comm` at 15 bytes, so `nvidia-cuda-mps-server` reads as this (seen on the
/// H100). The control daemon shares the prefix but never holds a GPU context.
const MPS_SERVER_COMM_PREFIX: &str = "nvidia-cuda-mps";

/// Process names by pid, pruned to the pids NVML still lists so a reused pid is read afresh.
#[derive(Default)]
pub struct NameCache {
    names: HashMap<u32, String>,
    seen: HashSet<u32>,
}

impl NameCache {
    fn name(&mut self, procfs_root: &Path, pid: u32) -> String {
        self.seen.insert(pid);
        self.names
            .entry(pid)
            .or_insert_with(|| procfs::process_name(procfs_root, pid).unwrap_or_default())
            .clone()
    }

    pub fn retain_seen(&mut self) {
        let seen = std::mem::take(&mut self.seen);
        self.names.retain(|pid, _| seen.contains(pid));
    }
}

/// nvml-wrapper sizes the MPS list exactly, so a process starting mid-call makes it fail with
/// InsufficientSize: one retry covers that race.
fn with_retry<T>(mut f: impl FnMut() -> Result<T, NvmlError>) -> Result<T, NvmlError> {
    match f() {
        Err(NvmlError::InsufficientSize(_)) => f(),
        other => other,
    }
}

fn memory(p: &ProcessInfo) -> Option<u64> {
    match p.used_gpu_memory {
        UsedGpuMemory::Used(b) => Some(b),
        UsedGpuMemory::Unavailable => None,
    }
}

/// Processes of one device handle (a whole GPU or one MIG instance), merged by pid.
fn list(
    ledger: &mut CallLedger,
    key: &str,
    d: &Device<'static>,
    mig_uuid: Option<&str>,
    out: &mut BTreeMap<u32, ProcessSample>,
) {
    let compute = ledger.call(key, "compute_running_processes", || {
        d.running_compute_processes()
    });
    let graphics = ledger.call(key, "graphics_running_processes", || {
        d.running_graphics_processes()
    });
    let mps: HashSet<u32> = ledger
        .call(key, "mps_compute_running_processes", || {
            with_retry(|| d.mps_running_compute_processes())
        })
        .ok()
        .unwrap_or_default()
        .iter()
        .map(|p| p.pid)
        .collect();
    let lists = [
        (compute.ok().unwrap_or_default(), ProcessKind::Compute),
        (graphics.ok().unwrap_or_default(), ProcessKind::Graphics),
    ];
    for (procs, kind) in lists {
        for p in procs {
            let kind = if mps.contains(&p.pid) {
                ProcessKind::MpsClient
            } else {
                kind
            };
            let entry = out.entry(p.pid).or_insert_with(|| ProcessSample {
                pid: p.pid,
                kind: Some(kind),
                mig_uuid: mig_uuid.map(str::to_owned),
                ..Default::default()
            });
            // A process with both a compute and a graphics context is listed twice; the
            // compute entry wins and memory is the larger figure, never the sum.
            entry.memory_used_bytes = entry.memory_used_bytes.max(memory(&p));
        }
    }
}

pub fn sample_processes(
    ledger: &mut CallLedger,
    gpu: &mut GpuState,
    mig: &[MigSample],
    names: &mut NameCache,
    procfs_root: &Path,
) -> Vec<ProcessSample> {
    let key = gpu.key.clone();
    let mut by_pid = BTreeMap::new();
    if mig.is_empty() {
        list(ledger, &key, &gpu.handle, None, &mut by_pid);
        apply_utilization(ledger, gpu, &mut by_pid);
    } else {
        // Per-process memory works through MIG device handles; utilization does not exist there.
        for (uuid, handle) in &gpu.mig.handles {
            list(ledger, &key, handle, Some(uuid), &mut by_pid);
        }
    }
    by_pid
        .into_values()
        .map(|mut p| {
            p.name = names.name(procfs_root, p.pid);
            if p.name.starts_with(MPS_SERVER_COMM_PREFIX) && p.kind != Some(ProcessKind::MpsClient)
            {
                p.kind = Some(ProcessKind::MpsServer);
            }
            if p.kind == Some(ProcessKind::MpsClient) {
                // Under MPS, NVML books the clients' kernels to the server process (measured on
                // an H100: clients 0 %, server 86 %): a client's share is unknown, not zero.
                p.sm_utilization = None;
                p.memory_utilization = None;
            }
            p
        })
        .collect()
}

/// Averages the samples newer than the last seen timestamp. NOT_FOUND means no process ran a
/// kernel since then, so every listed process gets 0.
fn apply_utilization(
    ledger: &mut CallLedger,
    gpu: &mut GpuState,
    by_pid: &mut BTreeMap<u32, ProcessSample>,
) {
    if by_pid.is_empty() || ledger.knows_unsupported(&gpu.key, "process_utilization") {
        return;
    }
    // Per-process last-seen times: NVML stamps each process's samples at its own moments, so
    // one device-wide mark can hide a process whose newest sample is a little older than
    // another's (seen on the H100 as a busy process reading 0 %).
    gpu.process_util_seen
        .retain(|pid, _| by_pid.contains_key(pid));
    let since = by_pid
        .keys()
        .map(|pid| gpu.process_util_seen.get(pid).copied().unwrap_or(0))
        .min()
        .unwrap_or(0);
    let samples = match gpu.handle.process_utilization_stats(since) {
        Ok(s) => s,
        Err(NvmlError::NotFound) => Vec::new(),
        Err(e) => {
            let _: Outcome<()> = ledger.record(&gpu.key, "process_utilization", &e);
            return;
        }
    };
    let mut sums: HashMap<u32, (f64, f64, u32)> = HashMap::new();
    for s in &samples {
        let seen = gpu.process_util_seen.get(&s.pid).copied().unwrap_or(0);
        if s.timestamp <= seen || !by_pid.contains_key(&s.pid) {
            continue;
        }
        let e = sums.entry(s.pid).or_default();
        e.0 += f64::from(s.sm_util);
        e.1 += f64::from(s.mem_util);
        e.2 += 1;
    }
    for s in &samples {
        if by_pid.contains_key(&s.pid) {
            let seen = gpu.process_util_seen.entry(s.pid).or_default();
            *seen = (*seen).max(s.timestamp);
        }
    }
    for p in by_pid.values_mut() {
        let (sm, mem) = match sums.get(&p.pid) {
            Some(&(sm, mem, n)) => (sm / f64::from(n) / 100.0, mem / f64::from(n) / 100.0),
            None => (0.0, 0.0),
        };
        p.sm_utilization = Some(sm.clamp(0.0, 1.0));
        p.memory_utilization = Some(mem.clamp(0.0, 1.0));
    }
}

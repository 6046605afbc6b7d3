//! Processes on a GPU: who they are (pid, name, kind), how much memory they hold, and their
//! share of SM time from NVML's process-utilization samples.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::path::Path;
use std::time::{Duration, Instant};

use nvml_wrapper::enums::device::UsedGpuMemory;
use nvml_wrapper::error::NvmlError;
use nvml_wrapper::struct_wrappers::device::ProcessInfo;
use nvml_wrapper::Device;
use nvml_wrapper_sys::bindings::nvmlProcessUtilizationSample_t;

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
    utilization_interval: Duration,
) -> Vec<ProcessSample> {
    let key = gpu.key.clone();
    let mut by_pid = BTreeMap::new();
    if mig.is_empty() {
        list(ledger, &key, &gpu.handle, None, &mut by_pid);
        apply_utilization(ledger, gpu, &mut by_pid, utilization_interval);
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

/// Per-process utilization kept on the GPU's thread between reads.
#[derive(Default)]
pub struct UtilizationReader {
    /// Newest sample seen, per pid.
    seen: HashMap<u32, u64>,
    /// (SM, memory) ratios of the last read, per pid, for the cycles in between.
    last: HashMap<u32, (f64, f64)>,
    read_at: Option<Instant>,
    buffer: Vec<nvmlProcessUtilizationSample_t>,
}

/// Enough for a busy GPU's samples since the last read; grown when the driver asks for more.
const INITIAL_SAMPLE_SLOTS: usize = 64;

/// One driver call into a buffer kept across reads ([`super::kept_buffer`]); returns how many
/// samples it holds.
pub fn read_samples(
    buffer: &mut Vec<nvmlProcessUtilizationSample_t>,
    d: &Device<'static>,
    since: u64,
) -> Result<usize, NvmlError> {
    let sym = d
        .nvml()
        .lib()
        .nvmlDeviceGetProcessUtilization
        .as_ref()
        .map_err(|e| NvmlError::FailedToLoadSymbol(e.to_string()))?;
    // SAFETY: a plain C struct of integers, for which all zero bits is a valid value.
    let empty: nvmlProcessUtilizationSample_t = unsafe { std::mem::zeroed() };
    super::kept_buffer::fill(buffer, INITIAL_SAMPLE_SLOTS, empty, |buf, count| {
        // SAFETY: the handle is valid while NVML is loaded; the buffer holds `count` entries.
        unsafe { sym(d.handle(), buf.as_mut_ptr(), count, since) }
    })
}

/// Per-process SM and memory shares, read every `interval` (the call costs ~1.7 ms on an H100,
/// more than every other per-cycle call together). The H100's driver keeps only its newest
/// sample per process, one every ~167 ms (measured: docs/validation.md), so any cadence yields
/// a snapshot and a longer one only makes it older; where a driver returns several samples
/// since the last read they are averaged. In between, processes keep the last figures, and a
/// process without one is read at once. NOT_FOUND means no process ran a kernel since the last
/// read, so every listed process gets 0.
fn apply_utilization(
    ledger: &mut CallLedger,
    gpu: &mut GpuState,
    by_pid: &mut BTreeMap<u32, ProcessSample>,
    interval: Duration,
) {
    if by_pid.is_empty() || ledger.knows_unsupported(&gpu.key, "process_utilization") {
        return;
    }
    let reader = &mut gpu.process_util;
    reader.seen.retain(|pid, _| by_pid.contains_key(pid));
    reader.last.retain(|pid, _| by_pid.contains_key(pid));
    // Read early when a process has no figure yet, so a new workload shows up at once.
    let due = super::is_due(reader.read_at, interval)
        || by_pid.keys().any(|pid| !reader.last.contains_key(pid));
    if due {
        reader.read_at = Some(Instant::now());
        // Per-process last-seen times: NVML stamps each process's samples at its own moments,
        // so one device-wide mark can hide a process whose newest sample is a little older
        // than another's (seen on the H100 as a busy process reading 0 %).
        let since = by_pid
            .keys()
            .map(|pid| reader.seen.get(pid).copied().unwrap_or(0))
            .min()
            .unwrap_or(0);
        let mut sums: HashMap<u32, (f64, f64, u32)> = HashMap::new();
        let read = ledger.timed("process_utilization", || {
            read_samples(&mut reader.buffer, &gpu.handle, since)
        });
        let samples = match read {
            Ok(n) => &reader.buffer[..n],
            Err(NvmlError::NotFound) => &[],
            Err(e) => {
                let _: Outcome<()> = ledger.record(&gpu.key, "process_utilization", &e);
                return;
            }
        };
        for s in samples {
            if !by_pid.contains_key(&s.pid) {
                continue;
            }
            let seen = reader.seen.entry(s.pid).or_default();
            if s.timeStamp > *seen {
                let e = sums.entry(s.pid).or_default();
                e.0 += f64::from(s.smUtil);
                e.1 += f64::from(s.memUtil);
                e.2 += 1;
            }
        }
        for s in samples {
            if let Some(seen) = reader.seen.get_mut(&s.pid) {
                *seen = (*seen).max(s.timeStamp);
            }
        }
        for pid in by_pid.keys() {
            let share = match sums.get(pid) {
                Some(&(sm, mem, n)) => (sm / f64::from(n) / 100.0, mem / f64::from(n) / 100.0),
                None => (0.0, 0.0),
            };
            reader.last.insert(*pid, share);
        }
    }
    for p in by_pid.values_mut() {
        if let Some(&(sm, mem)) = reader.last.get(&p.pid) {
            p.sm_utilization = Some(sm.clamp(0.0, 1.0));
            p.memory_utilization = Some(mem.clamp(0.0, 1.0));
        }
    }
}

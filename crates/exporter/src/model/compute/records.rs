//! Which processes' CUDA probes need kernel records: those whose device (a GPU or a MIG
//! instance) has another process that may run kernels there.
//!
//! Alone on its device, a process's share is NVML's own figure, which is right for it
//! (docs/validation.md), and records would cost every launch of it 1–2 µs for nothing. Once a
//! second process may run kernels beside it, NVML books the device's time to whichever
//! process it sampled, and only the probes' timelines can split it; so records go on for
//! every candidate of that device.

use std::collections::{HashMap, HashSet};

use crate::model::compute::{ActivityInputs, IDLE_SHARE, QUIET_CPU_CORES};
use crate::model::{NvmlSample, ProcessKind, ProcessSample};

/// Whether `p` may run kernels: the split's candidate notion (`compute`: not quiet). It is
/// kept here on its own, on NVML, CPU time and kernels the probe saw, and never on a probe's
/// verdict that its process ran nothing: that verdict needs records on, and must not be what
/// turns them off (records would go off, the process would look like a candidate again, and
/// on, in a loop).
fn may_run_kernels(p: &ProcessSample, activity: &ActivityInputs) -> bool {
    let nvml_busy = p.sm_utilization.is_some_and(|v| v >= IDLE_SHARE);
    let probe_busy = activity
        .probe
        .get(&p.pid)
        .and_then(|r| r.busy_ratio)
        .is_some_and(|b| b >= IDLE_SHARE);
    let cpu_quiet = activity
        .cpu_cores
        .get(&p.pid)
        .is_some_and(|&c| c < QUIET_CPU_CORES);
    nvml_busy || probe_busy || !cpu_quiet
}

/// The processes of every device where two or more may run kernels, over all GPUs and MIG
/// instances of the sample: the candidates, and the quiet processes beside them too. A quiet
/// process launches nothing, so its records cost nothing; without them, the first CPU blip
/// that made it a candidate found its probe with no reading, and the whole device's split was
/// withheld for a window (on the H100 corpus, an idle tenant polling for work at just over
/// [`QUIET_CPU_CORES`]: 17 of 220 honest reads). A process on several devices needs
/// records if any of them is shared: the probe's records are per process. The MPS server runs
/// its clients' kernels and is never a candidate.
pub fn shared_processes(sample: &NvmlSample, activity: &ActivityInputs) -> HashSet<u32> {
    let mut devices: HashMap<(usize, Option<&str>), DeviceTenants> = HashMap::new();
    for (g, gpu) in sample.gpus.iter().enumerate() {
        for p in &gpu.processes {
            if p.kind == Some(ProcessKind::MpsServer) {
                continue;
            }
            let d = devices.entry((g, p.mig_uuid.as_deref())).or_default();
            if d.pids.contains(&p.pid) {
                continue;
            }
            d.pids.push(p.pid);
            d.candidates += usize::from(may_run_kernels(p, activity));
        }
    }
    devices
        .into_values()
        .filter(|d| d.candidates > 1)
        .flat_map(|d| d.pids)
        .collect()
}

/// One device's tenant processes, and how many of them may run kernels.
#[derive(Default)]
struct DeviceTenants {
    candidates: usize,
    pids: Vec<u32>,
}

#[cfg(test)]
#[path = "records_tests.rs"]
mod tests;

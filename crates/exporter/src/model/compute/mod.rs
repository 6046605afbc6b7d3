//! Who used a device's compute, on evidence that can know it.
//!
//! NVML's per-process utilization is right only when one process runs kernels on a device:
//! measured on an H100, under time-slicing each NVML sample carries about the whole device's
//! utilization and is booked to one process (60 % + 20 % read 0.08 / 0.78), and under MPS
//! every client's kernels are booked to the server. So, per device (a GPU or a MIG instance):
//!
//! * a process is *quiet* when NVML books it nothing, the probe (if any) saw no kernels, and
//!   its CPU time over the trailing window is near zero: a process that launches kernels
//!   spends CPU doing so. So is one whose probe traced the whole window and saw no kernel,
//!   whatever its CPU does, where the device is idle or the other candidates' probes explain
//!   its busy time (a kernel still running has no record yet). Everything else that runs on
//!   the device is a *candidate*;
//! * with the CUDA probe on every candidate, each process's share is its kernel busy time.
//!   Under time-slicing a kernel's span includes the other tenants' slices, so the tenants'
//!   millisecond timelines are set side by side and each shared millisecond is split by the
//!   kernels' solo durations; without timelines from every candidate, the spans are scaled to
//!   add up to the device's measured busy fraction. Under MPS kernels run side by side: where
//!   another client's ran too, a process's kernels count by their solo durations;
//! * otherwise, with exactly one candidate, the device's utilization is that process's;
//!   quiet processes read 0;
//! * otherwise the candidates' shares are withheld (absent, not 0), and what the device
//!   measured but nobody can be given is published as unattributed.
//!
//! Idle is decided on the same evidence: a container is idle when the device has read idle
//! over the trailing window (one NVML reading is a snapshot of a fraction of a second), when
//! it runs nothing on the device, or when all its processes are quiet; busy when its share is
//! known and above the threshold; and otherwise unknown, which is counted apart and never
//! as idle.

pub mod evidence;
pub mod figures;
mod probe_split;
pub mod records;
mod sampling;
mod split_types;
pub mod timeslice;

use std::collections::{BTreeMap, HashMap};

pub use self::probe_split::complete_idle_timelines;
use self::probe_split::{idle_by_probe, probe_figures, split_by_probes};
use self::sampling::mean_between;
pub use self::split_types::*;
use super::{ProcessKind, ProcessSample};

fn is_quiet(p: &ProcessSample, activity: &ActivityInputs) -> bool {
    let nvml_quiet = p.sm_utilization.is_none_or(|v| v < IDLE_SHARE);
    // A probe whose records a profiler took knows nothing either way, like no probe.
    let probe_quiet = activity
        .probe
        .get(&p.pid)
        .is_none_or(|r| r.profiler || r.no_cupti || r.busy_ratio.is_some_and(|b| b < IDLE_SHARE));
    let cpu_quiet = activity
        .cpu_cores
        .get(&p.pid)
        .is_some_and(|&c| c < QUIET_CPU_CORES);
    nvml_quiet && probe_quiet && cpu_quiet
}

/// Splits one device's compute among its processes. The MPS server is never a candidate: it
/// runs its clients' kernels, not its own, so what NVML books to it is theirs.
pub fn split(d: &DeviceCompute<'_>) -> DeviceSplit {
    let mut candidates = Vec::new();
    let mut quiet = Vec::new();
    for p in d.processes {
        if p.kind == Some(ProcessKind::MpsServer) {
            continue;
        }
        if is_quiet(p, d.activity) {
            quiet.push(p.pid);
        } else {
            candidates.push(p.pid);
        }
    }
    let recent_activity = recent_readings(d);
    let device_window = d.device_activity.and(mean_between(
        &recent_activity,
        d.now,
        d.activity.window_seconds,
    ));
    let (seen_idle, unexplained) = idle_by_probe(&candidates, d, device_window);
    candidates.retain(|pid| !seen_idle.contains(pid));
    quiet.extend(&seen_idle);
    let mut probe_idle = seen_idle;
    probe_idle.sort_unstable();
    candidates.sort_unstable();
    quiet.sort_unstable();
    let mut shares: HashMap<u32, ProcessShare> = quiet
        .iter()
        .map(|&pid| {
            let share = ProcessShare {
                share: Some(0.0),
                busy_ratio: d
                    .activity
                    .probe
                    .get(&pid)
                    .and_then(|r| r.busy_ratio)
                    .map(|_| 0.0),
                quiet: true,
                ..Default::default()
            };
            (pid, share)
        })
        .collect();
    let (idle_since, device_idle) = device_idle_over_window(d);
    let idle_unsettled = idle_since.is_some() && !device_idle;
    let probed = probe_figures(&candidates, d);
    let mut out = DeviceSplit {
        method: SplitMethod::Withheld,
        device_activity: d.device_activity,
        candidates: candidates.clone(),
        quiet,
        probe_idle,
        probe_scale: None,
        why: String::new(),
        from_timelines: false,
        wide: None,
        disputed: Vec::new(),
        profiler: candidates
            .iter()
            .copied()
            .filter(|pid| d.activity.probe.get(pid).is_some_and(|r| r.profiler))
            .collect(),
        no_cupti: candidates
            .iter()
            .copied()
            .filter(|pid| d.activity.probe.get(pid).is_some_and(|r| r.no_cupti))
            .collect(),
        probe_stages: BTreeMap::new(),
        outlasting: BTreeMap::new(),
        solo_excess: None,
        idle_since,
        idle_unsettled,
        bounds_only: None,
        lone_stretch: None,
        device_window,
        figure_window: None,
        recent_activity,
        shares: HashMap::new(),
    };
    if candidates.is_empty() {
        if d.device_activity.is_some_and(|a| a >= IDLE_SHARE) {
            // The device is busy but every process on it looks quiet: something we cannot
            // see (a long kernel launched before the window) runs. Claim nothing.
            out.why = "the device is busy but every process looks quiet; shares withheld".into();
            for s in shares.values_mut() {
                s.share = None;
                s.quiet = false;
            }
            out.quiet.clear();
            out.probe_idle.clear();
        } else {
            out.method = SplitMethod::Idle;
            out.why = "nothing on the device runs kernels".into();
        }
    } else if !probed.is_empty() && probed.len() == candidates.len() {
        split_by_probes(d, &candidates, probed, &unexplained, &mut out, &mut shares);
    } else {
        split_by_nvml(d, &candidates, &mut out, &mut shares);
    }
    settle_idle(&mut out, &mut shares, device_idle, idle_unsettled);
    out.shares = shares;
    out
}

/// Without a probe reading for every candidate, what NVML's own figures allow: a lone
/// candidate's share, or nothing.
fn split_by_nvml(
    d: &DeviceCompute<'_>,
    candidates: &[u32],
    out: &mut DeviceSplit,
    shares: &mut HashMap<u32, ProcessShare>,
) {
    if candidates.len() == 1 && !d.mig_instance {
        // With one process able to run kernels, the device's own utilization is that
        // process's. It beats NVML's per-process samples, which the H100 splits oddly even
        // then (an idle holder beside a 50 % process: 0.37 per-process, 0.48 device, truth
        // 0.50); without it, NVML's per-process figures on the device (an MPS server's
        // included) are the lone process's.
        let total: f64 = d
            .device_activity
            .unwrap_or_else(|| d.processes.iter().filter_map(|p| p.sm_utilization).sum())
            .clamp(0.0, 1.0);
        let pid = candidates[0];
        shares.insert(
            pid,
            ProcessShare {
                share: Some(total),
                busy_ratio: None,
                quiet: false,
                ..Default::default()
            },
        );
        out.method = SplitMethod::SoleActiveProcess;
        out.why =
            format!("pid {pid} is the only process that may run kernels; NVML's figure is its own");
    } else if candidates.len() == 1 {
        out.method = SplitMethod::MigInstance;
        out.why = format!(
            "pid {} is the only active process in the instance",
            candidates[0]
        );
    } else if !out.profiler.is_empty() {
        out.method = SplitMethod::Withheld;
        out.why = profiler_why(&out.profiler);
    } else if !out.no_cupti.is_empty() {
        out.method = SplitMethod::Withheld;
        out.why = no_cupti_why(&out.no_cupti);
    } else {
        out.method = SplitMethod::Withheld;
        out.why = format!(
            "{} processes may run kernels and NVML cannot split them (it books each sample to \
             one process{}); shares withheld",
            candidates.len(),
            if d.mps {
                ", and MPS clients' kernels to the server"
            } else {
                ""
            }
        );
    }
}

/// Why a device's shares are withheld while a profiler holds a candidate's CUPTI. The text
/// starts with `profiler`, the reason's name.
pub fn profiler_why(pids: &[u32]) -> String {
    let pids: Vec<String> = pids.iter().map(u32::to_string).collect();
    format!(
        "profiler: a profiler in pid {} holds CUPTI, so its CUDA probe sees none of its \
         kernels; its share and every co-tenant's (split against its timeline) withheld",
        pids.join(", ")
    )
}

/// Why a device's shares are withheld while a candidate's probe found no CUPTI. The text starts
/// with `no-cupti`, the reason's name.
pub fn no_cupti_why(pids: &[u32]) -> String {
    let pids: Vec<String> = pids.iter().map(u32::to_string).collect();
    format!(
        "no-cupti: the CUDA probe in pid {} found no CUPTI to load (TESSERA_PROBE_CUPTI names \
         it), so it sees none of its kernels; shares withheld",
        pids.join(", ")
    )
}

/// Settles the split against the device's idle readings, and says why in `out.why`.
fn settle_idle(
    out: &mut DeviceSplit,
    shares: &mut HashMap<u32, ProcessShare>,
    device_idle: bool,
    idle_unsettled: bool,
) {
    if device_idle && out.method != SplitMethod::Idle {
        // A measured idle device settles it whatever the per-process readings say.
        out.method = SplitMethod::Idle;
        out.why = "the device was idle".into();
        for pid in out.candidates.iter() {
            shares.insert(
                *pid,
                ProcessShare {
                    share: Some(0.0),
                    busy_ratio: shares.get(pid).and_then(|s| s.busy_ratio).map(|_| 0.0),
                    quiet: false,
                    ..Default::default()
                },
            );
        }
    }
    if idle_unsettled && out.method != SplitMethod::Idle {
        out.why = format!(
            "{}; the device reads idle, but not yet over the window (NVML's figure is a \
             snapshot of a fraction of a second): nobody is called idle on it",
            out.why
        );
    }
    if !out.probe_idle.is_empty() {
        let pids: Vec<String> = out.probe_idle.iter().map(u32::to_string).collect();
        out.why = format!(
            "{}; the probe saw pid {} launch no kernel while the others' kernels explain the \
             device's busy time: idle",
            out.why,
            pids.join(", ")
        );
    }
}

/// How much of the window a run of idle readings must span (as the CPU history must).
const WINDOW_SPANNED: f64 = 0.8;

/// The device's readings over the probes' window: the previous sample's, less those older
/// than the window, and this one. A clock stepped back drops the older ones.
fn recent_readings(d: &DeviceCompute<'_>) -> Vec<(f64, f64)> {
    // The timelines' window ends their lag before the sample: its readings are kept as long.
    let keep = d.activity.window_seconds + d.activity.timeline_lag_seconds;
    let mut out: Vec<(f64, f64)> = d
        .recent_activity
        .iter()
        .copied()
        .filter(|(t, _)| *t < d.now && d.now - *t < keep)
        .collect();
    if let Some(a) = d.device_activity {
        out.push((d.now, a));
    }
    out
}

/// When the device's run of idle readings began (`None` unless it reads idle now), and
/// whether that run spans the window. NVML's device utilization is a snapshot of the last
/// ~167 ms on an H100 (docs/validation.md): a process alone running 12–50 ms kernels at 30 %
/// has gaps that long between them, so one reading of 0 is not an idle window. A MIG
/// instance's GPM activity covers the whole time since the previous sample, so one decides.
fn device_idle_over_window(d: &DeviceCompute<'_>) -> (Option<f64>, bool) {
    if !d.device_activity.is_some_and(|a| a < IDLE_SHARE) {
        return (None, false);
    }
    // A clock stepped back must not hold the device "not yet idle" until it catches up.
    let since = d.idle_since.filter(|s| *s <= d.now).unwrap_or(d.now);
    let window = if d.mig_instance {
        0.0
    } else {
        d.activity.window_seconds
    };
    (Some(since), d.now - since >= window * WINDOW_SPANNED)
}

/// A container's activity from its processes' shares on one device.
pub fn container_activity(split: &DeviceSplit, pids: &[u32], share: Option<f64>) -> Activity {
    if split.method == SplitMethod::Idle || pids.is_empty() {
        return Activity::Idle;
    }
    if pids.iter().all(|pid| split.share_of(*pid).quiet) {
        return Activity::Idle;
    }
    // Those shares are the device's reading, which says idle only once it has over the window.
    let from_device_reading = matches!(
        split.method,
        SplitMethod::SoleActiveProcess
            | SplitMethod::SoleActiveContainer
            | SplitMethod::SoleActivePod
    );
    match share {
        Some(v) if v < IDLE_SHARE && from_device_reading && split.idle_unsettled => {
            Activity::Unknown
        }
        Some(v) if v < IDLE_SHARE => Activity::Idle,
        Some(_) => Activity::Busy,
        None => Activity::Unknown,
    }
}

/// Device activity not given to any container, when the device measured some.
pub fn unattributed(device_activity: Option<f64>, attributed: &[Option<f64>]) -> Option<f64> {
    let a = device_activity?;
    let given: f64 = attributed.iter().flatten().sum();
    Some((a - given).clamp(0.0, 1.0))
}

#[cfg(test)]
mod tests;

#[cfg(test)]
mod idle_window_tests;

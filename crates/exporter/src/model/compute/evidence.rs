//! Deciding at the widest level the evidence allows, and checking the probe against evidence
//! its tenant does not control (docs/design.md, invariant 6).
//!
//! [`compute::split`](crate::model::compute::split) decides per process. Above it, per device:
//!
//! * **sole-active-container / sole-active-pod**: when every candidate (a process that may run
//!   kernels) belongs to one container, or to one pod, the device's own reading is that
//!   container's or pod's, even though its processes' shares stay withheld. Nobody else ran
//!   kernels there, so nobody else's time can be in it.
//! * **by-difference**: when every candidate but those of one container carries the probe,
//!   that container gets the device's busy time less the probed tenants' own time (their
//!   kernels' solo parts where their timelines say, else their whole spans, which under
//!   time-slicing include the unprobed tenant's slices: the difference is then a lower bound).
//!   Never below [`IDLE_SHARE`]: a difference that small says nothing, and a busy tenant must
//!   not read idle.
//! * **disputed**: wherever the probes' claims decide a split (probe, by-difference), they are
//!   checked first against the device's measured busy time, NVML's bookings, the processes'
//!   CPU time and the probes' shared clock. A claim that contradicts them beyond the stated
//!   tolerance withholds the whole device's split: an under-reporting tenant's time would
//!   otherwise land on its co-tenants (docs/security.md, "Billing").

use std::collections::{BTreeSet, HashMap};

use super::figures::{DisputeReason, WideFigure};
use super::timeslice::{clean_lone_time, lone_time};
use crate::model::compute::{
    DeviceCompute, DeviceSplit, ProbeReading, ProbeTimeline, ProcessShare, SplitMethod, IDLE_SHARE,
    NVML_BOOKED, QUIET_CPU_CORES,
};
use crate::model::holding::PodRef;

/// How far (share of device time, absolute) the sum of the probes' claims may miss the
/// device's measured busy fraction. NVML's utilization is a coarse recent sample and the
/// probes' window is seconds long; the H100 runs agreed within 0.05 (docs/validation.md).
pub const CLAIM_TOLERANCE: f64 = 0.15;
/// NVML books a process's microsecond kernels many times over: beside spans under a per cent,
/// honest tenants' bookings exceeded their spans by up to 66 µs per kernel the probe reported
/// (the H100 corpus, 220 reads; 0.05–0.07 booked for 0.005–0.009 of spans at
/// 2,000–3,000 kernels a second). What that explains, up to [`CLAIM_TOLERANCE`] (a probe
/// reports its own kernel count), is not a contradiction.
pub const NVML_OVER_READ_PER_KERNEL_SECONDS: f64 = 100e-6;
/// A probe claiming at least this share of the device from a process that spent no CPU time
/// (below [`QUIET_CPU_CORES`]): launching kernels costs CPU.
pub const CLAIM_NEEDS_CPU: f64 = 0.20;
/// Probes on one node read one clock; two that differ by more than this are not both right.
pub const CLOCK_TOLERANCE_SECONDS: f64 = 0.25;
/// Claims adding up to less than this share of the device's busy time are not an honest
/// shortfall. Honest claims fall short of NVML's figure too: time-slicing spends time switching
/// contexts, and NVML over-reads microsecond kernels (2.7x on the H100, docs/validation.md),
/// which is why a probe tracing in duty cycles is not summed at all.
pub const UNDER_CLAIMED_SHARE: f64 = 0.5;
/// In milliseconds only one probe covered, its kernels ran this much slower than their solo
/// durations explain: its solo estimates, or someone the probes do not show, are off. Past
/// this the point figures are withheld and only the bounds published (`bounds_only`): the
/// floor counts solo durations, so a hidden tenant's slices land on nobody's floor.
pub const STRETCH_TOLERANCE: f64 = 0.35;
/// Past this stretch, and with [`HIDDEN_SHARE`] of the device unexplained, the split is
/// disputed: a hidden tenant held at least as much of those milliseconds as the tenant's own
/// kernels ran, with a tenth to spare for the solo estimates' error. The tolerance is not a
/// bound on one estimator's bias: an honest CUDA-graph tenant's solo estimates err low by a
/// share (0.92 alone on the H100, lower under contention), which the bounds band
/// absorbs; a hider must also be big enough to matter to a bill.
pub const STRETCH_DISPUTE: f64 = 0.55;
/// The unexplained time in those milliseconds, as a share of the milliseconds every probe
/// traced, below which a stretch disputes nothing (it is within a share's accuracy target).
pub const HIDDEN_SHARE: f64 = 0.03;
/// Under time-slicing, the share of the shared milliseconds the tenants' solo parts may run
/// past them before the timelines contradict themselves ([`DisputeReason::SoloExcess`]). Honest
/// heavy draws on the H200, their timelines aligned millisecond for millisecond, read at most
/// 0.024 and 0.017 (the heavy corpus, 220 reads replayed from the probes' record logs);
/// about twice that, for tenants and estimators not seen there. (Timelines each placed by
/// its own report stand a few milliseconds apart: honest reads past 0.05 were 6-10 %, which
/// `ProbeBook::timelines` prevents by placing them all by one clock.)
pub const SOLO_EXCESS_TOLERANCE: f64 = 0.04;
/// Stretch is judged only over at least this many milliseconds' worth of lone coverage.
const MIN_ALONE_MS: f64 = 50.0;
/// Fewer traced milliseconds than this in a timeline, and its solo parts say too little.
const MIN_TRACED_MS: usize = 50;

/// Revisits `split` with what is known of each process's owner (`owners`: the processes with
/// a known namespace, pod and container). Keeps its own changes here, so `compute::split`
/// stays the per-process rule.
pub fn review(split: &mut DeviceSplit, d: &DeviceCompute<'_>, owners: &HashMap<u32, &PodRef>) {
    match split.method {
        SplitMethod::Probe => {
            split.lone_stretch = timelined_stretch(split, d).map(|(s, h)| [s, h]);
            // A share withheld because its kernels outlast time slices is still claimed: the
            // checks weigh what the probe says, as they did before it was withheld.
            let claims: Vec<(u32, f64)> = split
                .candidates
                .iter()
                .filter_map(|pid| {
                    let claim = match split.outlasting.get(pid) {
                        Some(o) => o.claim,
                        None => split.shares.get(pid)?.share?,
                    };
                    Some((*pid, claim))
                })
                .collect();
            let reasons = check_claims(split, d, &claims, true);
            if reasons.is_empty() {
                keep_bounds_only(split);
            }
            if reasons.is_empty() && split.outlasting.values().any(|o| o.withheld) {
                // Withheld shares leave the device's reading to its pod when every candidate is
                // that pod's.
                widen(split, d, owners);
            } else if !reasons.is_empty() {
                unbelieve_probe_idle(split);
                // One container's (or pod's) lying probe harms only itself: the device's
                // reading is still that owner's.
                if !widen(split, d, owners) {
                    dispute(split, reasons);
                } else {
                    split.disputed = reasons;
                }
            }
        }
        SplitMethod::Withheld if !split.candidates.is_empty() => {
            if widen(split, d, owners) {
                return;
            }
            // By difference the profiled process would get what its co-tenants' probes leave,
            // and theirs would be read as if it ran nothing beside them. A probe that found no
            // CUPTI is a setting to fix, which the reason names; a figure by difference would
            // hide it.
            if !split.profiler.is_empty() || !split.no_cupti.is_empty() {
                return;
            }
            // A probe that stopped reporting does not make its process "the unprobed one":
            // by difference would hand it whatever its co-tenants' probes leave.
            let silent = split
                .candidates
                .iter()
                .any(|pid| d.activity.probe.get(pid).is_some_and(|r| r.silent));
            if silent {
                dispute(split, vec![DisputeReason::ProbeSilent]);
                return;
            }
            by_difference(split, d, owners);
        }
        _ => {}
    }
}

fn owner_key<'a>(owners: &HashMap<u32, &'a PodRef>, pid: u32) -> Option<&'a PodRef> {
    owners
        .get(&pid)
        .copied()
        .filter(|p| !p.namespace.is_empty() && !p.pod.is_empty() && !p.container.is_empty())
}

/// The device's own reading, or NVML's per-process figures summed when it has none.
fn device_reading(split: &DeviceSplit, d: &DeviceCompute<'_>) -> f64 {
    split
        .device_activity
        .unwrap_or_else(|| d.processes.iter().filter_map(|p| p.sm_utilization).sum())
        .clamp(0.0, 1.0)
}

/// Sole-active-container or sole-active-pod, when every candidate is of one. Process shares
/// stay as they were (withheld).
fn widen(split: &mut DeviceSplit, d: &DeviceCompute<'_>, owners: &HashMap<u32, &PodRef>) -> bool {
    let Some(pods) = split
        .candidates
        .iter()
        .map(|pid| owner_key(owners, *pid))
        .collect::<Option<Vec<&PodRef>>>()
    else {
        return false;
    };
    let Some(first) = pods.first() else {
        return false;
    };
    let containers: BTreeSet<(&str, &str, &str)> = pods
        .iter()
        .map(|p| (p.namespace.as_str(), p.pod.as_str(), p.container.as_str()))
        .collect();
    let one_pod = pods
        .iter()
        .all(|p| p.namespace == first.namespace && p.pod == first.pod);
    if !one_pod {
        return false;
    }
    let share = device_reading(split, d);
    let container = (containers.len() == 1).then(|| first.container.clone());
    split.method = if container.is_some() {
        SplitMethod::SoleActiveContainer
    } else {
        SplitMethod::SoleActivePod
    };
    split.why = match &container {
        Some(c) => format!(
            "{} processes may run kernels, all of container {}/{}/{c}: the device's reading is \
             the container's; process shares withheld",
            split.candidates.len(),
            first.namespace,
            first.pod
        ),
        None => format!(
            "{} containers of pod {}/{} may run kernels, no other: the device's reading is the \
             pod's; container shares withheld",
            containers.len(),
            first.namespace,
            first.pod
        ),
    };
    for pid in &split.candidates {
        if let Some(s) = split.shares.get_mut(pid) {
            s.share = None;
            s.busy_ratio = None;
        }
    }
    split.wide = Some(WideFigure {
        namespace: first.namespace.clone(),
        pod: first.pod.clone(),
        container,
        share,
    });
    true
}

/// A probed process's own time from its timeline: what its kernels' solo durations explain,
/// over the milliseconds it traced. `None` when the timeline says too little.
fn solo_share(t: &ProbeTimeline) -> Option<f64> {
    let mut traced = 0usize;
    let mut solo = 0.0;
    for ((c, s), tr) in t.covered.iter().zip(&t.solo).zip(&t.traced) {
        if *tr {
            traced += 1;
            solo += s.min(*c).max(0.0);
        }
    }
    (traced >= MIN_TRACED_MS).then(|| (solo / traced as f64).clamp(0.0, 1.0))
}

/// The one unprobed container's figure: the device's busy time less the probed tenants'.
fn by_difference(split: &mut DeviceSplit, d: &DeviceCompute<'_>, owners: &HashMap<u32, &PodRef>) {
    // Under MPS kernels overlap, so busy time less spans is nobody's; a MIG instance's reading
    // is SM activity, not a busy fraction.
    if d.mps || d.mig_instance {
        return;
    }
    let Some(device) = split.device_activity else {
        return;
    };
    let probe = &d.activity.probe;
    let (probed, unprobed): (Vec<u32>, Vec<u32>) = split
        .candidates
        .iter()
        .partition(|pid| probe.contains_key(pid));
    let Some(first) = unprobed.first().and_then(|pid| owner_key(owners, *pid)) else {
        return;
    };
    let same = |pid: &u32| {
        owner_key(owners, *pid).is_some_and(|p| {
            p.namespace == first.namespace && p.pod == first.pod && p.container == first.container
        })
    };
    if probed.is_empty() || !unprobed.iter().all(same) || probed.iter().any(same) {
        return;
    }
    let silent = probed.iter().any(|pid| {
        probe
            .get(pid)
            .is_some_and(|r| r.silent || r.busy_ratio.is_none())
    });
    if silent {
        dispute(split, vec![DisputeReason::ProbeSilent]);
        return;
    }
    let mut own: Vec<(u32, f64)> = Vec::new();
    let mut spans_only = false;
    for pid in &probed {
        let span = probe
            .get(pid)
            .and_then(|r| r.busy_ratio)
            .unwrap_or(0.0)
            .clamp(0.0, 1.0);
        match d.activity.probe_timelines.get(pid).and_then(solo_share) {
            Some(s) => own.push((*pid, s)),
            None => {
                spans_only = true;
                own.push((*pid, span));
            }
        }
    }
    let mut reasons = check_claims(split, d, &own, false);
    if own.iter().any(|(_, c)| *c < IDLE_SHARE) {
        // A probed candidate (it spends CPU, or NVML booked it) that claims nothing may be
        // hiding kernels; here its co-tenant would pay for them.
        reasons.push(DisputeReason::ClaimsNothing);
    }
    let claimed: f64 = own.iter().map(|(_, c)| c).sum();
    if claimed > device + CLAIM_TOLERANCE && probed.len() == 1 && !spans_only {
        reasons.push(DisputeReason::OverClaimed);
    }
    if !reasons.is_empty() {
        reasons.sort_unstable();
        reasons.dedup();
        dispute(split, reasons);
        return;
    }
    let rest = device - claimed;
    if rest < IDLE_SHARE {
        split.why = format!(
            "{}; the probed tenants' claims ({claimed:.3}) leave nothing measurable to the \
             unprobed container {}/{}/{}",
            split.why, first.namespace, first.pod, first.container
        );
        return;
    }
    for (pid, c) in &own {
        split.shares.insert(
            *pid,
            ProcessShare {
                share: Some(*c),
                busy_ratio: Some(*c),
                quiet: false,
                ..Default::default()
            },
        );
    }
    split.method = SplitMethod::ByDifference;
    split.why = format!(
        "container {}/{}/{} carries no probe, every other candidate does: its figure is the \
         device's busy time less theirs ({device:.3} - {claimed:.3}){}",
        first.namespace,
        first.pod,
        first.container,
        if spans_only {
            "; from kernel spans, which include its slices: a lower bound"
        } else {
            ""
        }
    );
    split.wide = Some(WideFigure {
        namespace: first.namespace.clone(),
        pod: first.pod.clone(),
        container: Some(first.container.clone()),
        share: rest,
    });
}

/// Checks the claims a split would rest on against evidence the tenants do not control.
/// `sums`: whether the claims should add up to the device's busy time (every candidate
/// probed); by difference they do by construction.
fn check_claims(
    split: &DeviceSplit,
    d: &DeviceCompute<'_>,
    claims: &[(u32, f64)],
    sums: bool,
) -> Vec<DisputeReason> {
    let mut out = Vec::new();
    let probe = &d.activity.probe;
    let readings: Vec<_> = split
        .candidates
        .iter()
        .filter_map(|pid| probe.get(pid))
        .collect();
    if readings.iter().any(|r| r.silent) {
        out.push(DisputeReason::ProbeSilent);
    }
    if totals_only_beside_timelines(&readings, d) {
        out.push(DisputeReason::TotalsOnly);
    }
    let clocks: Vec<f64> = readings.iter().filter_map(|r| r.clock_seconds).collect();
    let spread = clocks.iter().copied().fold(f64::NEG_INFINITY, f64::max)
        - clocks.iter().copied().fold(f64::INFINITY, f64::min);
    if clocks.len() > 1 && spread > CLOCK_TOLERANCE_SECONDS {
        out.push(DisputeReason::Clock);
    }
    for (pid, claim) in claims {
        let Some(p) = d.processes.iter().find(|p| p.pid == *pid) else {
            continue;
        };
        // What the probe itself says it ran, not the share the split gave it (a timeline split
        // deflates a light tenant's share below its spans), and NVML's booking past what its
        // over-read of the kernels the probe reports explains.
        let reading = probe.get(pid);
        let raw = reading.and_then(|r| r.busy_ratio).unwrap_or(*claim);
        let per_second = match (
            reading.and_then(|r| r.window_kernels),
            d.activity.window_seconds,
        ) {
            (Some(k), w) if w > 0.0 => k as f64 / w,
            _ => 0.0,
        };
        let over_read = (per_second * NVML_OVER_READ_PER_KERNEL_SECONDS).min(CLAIM_TOLERANCE);
        if raw < IDLE_SHARE
            && p.sm_utilization
                .is_some_and(|v| v >= NVML_BOOKED + over_read)
        {
            out.push(DisputeReason::NvmlBooked);
        }
        let cpu = d.activity.cpu_cores.get(pid);
        if raw >= CLAIM_NEEDS_CPU && cpu.is_some_and(|c| *c < QUIET_CPU_CORES) {
            out.push(DisputeReason::ClaimWithoutCpu);
        }
    }
    // `review` measured the stretch once for the probes' split (`lone_stretch`); by difference
    // the claims are not summed and no stretch is read.
    let stretch = split.lone_stretch.filter(|_| sums);
    if stretch.is_some_and(|[s, hidden]| s > STRETCH_DISPUTE && hidden >= HIDDEN_SHARE) {
        out.push(DisputeReason::StretchedAlone);
    }
    if sums && split.solo_excess.is_some_and(|e| e > SOLO_EXCESS_TOLERANCE) {
        out.push(DisputeReason::SoloExcess);
    }
    // Without timelines, time-sliced spans absorb whatever a silent co-tenant ran: a candidate
    // claiming nothing beside one claiming something cannot be told from one hiding kernels.
    // (Under MPS kernels run side by side and a hider barely stretches the others' spans.)
    let timeless = sums && !d.mps && !d.mig_instance && !split.from_timelines;
    if timeless
        && claims.iter().any(|(_, c)| *c < IDLE_SHARE)
        && claims.iter().any(|(_, c)| *c >= IDLE_SHARE)
    {
        out.push(DisputeReason::ClaimsNothing);
    }
    let duty_cycled = readings
        .iter()
        .any(|r| r.traced_share.is_some_and(|t| t < 0.98));
    if sums && !d.mig_instance {
        // The claims cover the probes' window; so must the device's figure they are held to.
        if let Some(device) = split.device_window.or(split.device_activity) {
            let given: f64 = claims.iter().map(|(_, c)| c).sum();
            if !duty_cycled
                && device - given > CLAIM_TOLERANCE
                && given < device * UNDER_CLAIMED_SHARE
            {
                out.push(DisputeReason::UnderClaimed);
            }
            // Spans overlap under MPS, and under time-slicing without timelines they include
            // the others' slices: only a timeline split, or a lone probe, must fit.
            let scale = split.probe_scale.unwrap_or(1.0);
            let before_cap = if scale > 0.0 { given / scale } else { given };
            let exclusive = !d.mps && (split.from_timelines || claims.len() == 1);
            if exclusive && before_cap > device + CLAIM_TOLERANCE {
                out.push(DisputeReason::OverClaimed);
            }
        }
    }
    out.sort_unstable();
    out.dedup();
    out
}

/// A probe that reports kernels in totals only (wire version 1) beside probes that send
/// timelines. Every check that weighs one tenant's kernels against another's reads the
/// timelines; a probe that sends none leaves its claim to the sums alone, which tolerate 0.15
/// of the device (honest tenants fall that far from NVML's figure). A lying probe need only
/// speak the older wire to hide inside that tolerance or claim twice its time: the H100
/// corpus caught 1 of 11 reads of a 2× over-claimer and none of a 0.25× MPS under-claimer
/// that way. tessera's own probe has sent timelines since version 2, so beside it the older
/// wire is a downgrade, and the split is withheld until that process runs a current probe. A
/// totals-only probe that saw no kernel claims nothing and stands (its empty timeline is
/// filled in, `complete_idle_timelines`); a device whose probes all speak version 1 is split
/// as before. Not on a MIG instance, where timelines are not split.
fn totals_only_beside_timelines(readings: &[&ProbeReading], d: &DeviceCompute<'_>) -> bool {
    !d.mig_instance
        && readings.iter().any(|r| !r.totals_only)
        && readings
            .iter()
            .any(|r| r.totals_only && r.window_kernels.is_some_and(|k| k > 0))
}

/// In the milliseconds every candidate traced and exactly one covered, how much of that one's
/// covered time its kernels' solo durations did not explain (`stretch`), and that time as a
/// share of the milliseconds every candidate traced (`hidden`). Under time-slicing only another
/// context's slices stretch a kernel, and no candidate claimed those milliseconds; an honest
/// tenant's solo estimates that err low read as a stretch too. `None` when too few lone
/// milliseconds were covered to say.
///
/// A process whose kernels outlast time slices (`outlasting`) is read over its clean runs only
/// ([`clean_lone_time`]): in a millisecond it alone covered inside a kernel that a co-tenant's
/// slice interrupted, its span holds that slice's switches and the rest of it, and its solo
/// duration is spread over the whole span. Those are the probed co-tenant's, not a hidden
/// tenant's; a hidden tenant interrupts runs no probed tenant is near and still shows. On the
/// H200, 16k GEMMs beside an eager decoder and a CUDA-graph encoder read 0.46–0.48 over their
/// lone milliseconds (point figures withheld), 1.0–1.02 over their clean runs.
fn lone_stretch(
    candidates: &[u32],
    outlasting: &BTreeSet<u32>,
    d: &DeviceCompute<'_>,
) -> Option<(f64, f64)> {
    let lines = candidates
        .iter()
        .map(|pid| d.activity.probe_timelines.get(pid))
        .collect::<Option<Vec<&ProbeTimeline>>>()?;
    let lone = lone_time(&lines);
    let clean = (!outlasting.is_empty()).then(|| clean_lone_time(&lines));
    let pick = |i: usize| match &clean {
        Some(c) if outlasting.contains(&candidates[i]) => (c.covered[i], c.solo[i]),
        _ => (lone.covered[i], lone.solo[i]),
    };
    let covered: f64 = (0..lines.len()).map(|i| pick(i).0).sum();
    let solo: f64 = (0..lines.len()).map(|i| pick(i).1).sum();
    let common = lone.common;
    (covered >= MIN_ALONE_MS).then(|| {
        let unexplained = covered - solo;
        (unexplained / covered, unexplained / common as f64)
    })
}

/// How far the time-sliced tenants' kernels ran past their solo durations in the milliseconds
/// only one probe covered, and the unexplained share; `None` under MPS or without timelines.
/// A process idle on its own probe's word is one more timeline: if the others' kernels ran
/// stretched while it claimed nothing, its probe is hiding the slices it took.
fn timelined_stretch(split: &DeviceSplit, d: &DeviceCompute<'_>) -> Option<(f64, f64)> {
    if d.mps || (!split.from_timelines && split.probe_idle.is_empty()) {
        return None;
    }
    let timelined: Vec<u32> = split
        .candidates
        .iter()
        .chain(&split.probe_idle)
        .copied()
        .collect();
    let outlasting: BTreeSet<u32> = split.outlasting.keys().copied().collect();
    lone_stretch(&timelined, &outlasting, d)
}

/// Claims that pass every check, from timelines stretched in lone milliseconds past
/// [`STRETCH_TOLERANCE`] but not past the dispute's mark: the point figures are withheld (the
/// split cannot tell an estimate's error from a small hidden tenant) and the bounds stay.
fn keep_bounds_only(split: &mut DeviceSplit) {
    let Some([stretch, _]) = split.lone_stretch.filter(|[s, _]| *s > STRETCH_TOLERANCE) else {
        return;
    };
    // A process idle on its own probe's word beside stretched kernels may be the one hiding.
    unbelieve_probe_idle(split);
    for pid in &split.candidates {
        let s = split.shares.entry(*pid).or_default();
        s.share = None;
        s.busy_ratio = None;
    }
    split.bounds_only = Some(stretch);
    split.why = format!(
        "{}; point figures withheld, bounds published: where only one probe covered a \
         millisecond its kernels ran {:.0} % past their solo durations (an estimate's error or \
         a small hidden tenant: the floor counts solo durations, so neither is billed to it)",
        split.why,
        stretch * 100.0
    );
}

/// Once claims are disputed, a process idle only on its own probe's word is a candidate again:
/// neither idle nor the reason its co-tenant's container owns the device's reading.
fn unbelieve_probe_idle(split: &mut DeviceSplit) {
    let believed = std::mem::take(&mut split.probe_idle);
    split.quiet.retain(|pid| !believed.contains(pid));
    for pid in believed {
        split.shares.insert(
            pid,
            ProcessShare {
                share: None,
                busy_ratio: None,
                quiet: false,
                ..Default::default()
            },
        );
        split.candidates.push(pid);
    }
    split.candidates.sort_unstable();
}

/// Withholds every candidate's share: nobody is charged on claims that evidence contradicts.
fn dispute(split: &mut DeviceSplit, reasons: Vec<DisputeReason>) {
    unbelieve_probe_idle(split);
    for pid in &split.candidates {
        split.shares.insert(
            *pid,
            ProcessShare {
                share: None,
                busy_ratio: None,
                quiet: false,
                ..Default::default()
            },
        );
    }
    split.method = SplitMethod::Disputed;
    split.why = format!(
        "the CUDA probes' claims contradict evidence the tenants do not control ({}); shares \
         withheld, nobody charged",
        reasons
            .iter()
            .map(|r| r.as_label())
            .collect::<Vec<_>>()
            .join(", ")
    );
    split.wide = None;
    split.disputed = reasons;
}

#[cfg(test)]
#[path = "evidence_tests.rs"]
mod tests;

#[cfg(test)]
#[path = "evidence_profiler_tests.rs"]
mod profiler_tests;

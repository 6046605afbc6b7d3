//! Time-sliced shares from the CUDA probes' millisecond timelines, and the evidence of each
//! step (`ProbeStages`, shown in `/debug/attribution`), so that a reading that misses can be
//! traced to the step that lost the time.
//!
//! A time-sliced GPU runs one context at a time. A millisecond only one process's kernels
//! covered is wholly its own. Where several covered it:
//!
//! * if their spans add up to no more than the millisecond, nothing shows that they overlap:
//!   a kernel's span starts when it starts executing, so a kernel shorter than a time slice
//!   runs inside its own slice and its span is its own time. Each keeps its span. (Splitting
//!   these by solo estimates lost the estimates' error every time: the short, light tenants
//!   of an inference service read 20–26 % low on the H100, docs/validation.md);
//! * past the millisecond, spans overlap: a kernel longer than a slice is stretched over the
//!   others' slices. Each process gets what its kernels' solo durations explain, scaled to fit
//!   when they add up past the millisecond (kernels that never ran alone, an even split when
//!   every tenant is stretched alike). The rest went to switching and is nobody's.
//!
//! For a probe that traced the whole window, the timeline gives the *fraction* of its span time
//! that was its own; the amount comes from its span total over the activity window
//! (`ProbeReading::busy_ratio`). The timeline is read 2 s behind each probe's clock, and a
//! probe hands its records over only once its CUPTI buffer holds no kernel still running: a
//! record later than that leaves the window's last milliseconds short, which once cost a busy
//! tenant beside a process that launched nothing 4 points. A fraction survives a short tail; a
//! sum does not. A probe tracing in duty cycles has no span total of the window, only its
//! traced milliseconds: its share is its own time over the milliseconds every tenant traced
//! (measured on the H100, multiplying two samples of different milliseconds moved four
//! CUDA-graph tenants by ±4 points against the timeline alone).

use std::collections::HashMap;

use serde::Serialize;

/// One process's kernel timeline from the probe over the trailing window, per millisecond
/// of the probes' shared clock. Every process's timeline covers the same instants.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ProbeTimeline {
    /// Fraction of each millisecond covered by the process's kernel spans.
    pub covered: Vec<f64>,
    /// Of that, what the kernels' solo durations explain (the rest is waiting on others).
    pub solo: Vec<f64>,
    /// Whether the probe traced each millisecond; `covered` and `solo` mean nothing where not.
    pub traced: Vec<bool>,
}

/// Fewer milliseconds traced by every tenant than this, and the timelines say too little.
pub const MIN_COMMON_TRACED_MS: usize = 50;
/// Fewer covered milliseconds than this in a process's timeline and its own fraction is not
/// read from it: its span total stands as it is (the device's figure still caps the sum).
const MIN_COVERED_MS: f64 = 5.0;

/// What each step of the time-sliced split gave one process, as ratios of the window.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize)]
pub struct ProbeStages {
    /// The union of its kernel spans over the activity window (the probe's totals).
    pub spans: f64,
    /// The same union as its timeline shows it, over the milliseconds every tenant traced.
    pub timeline_covered: f64,
    /// Of that, what its kernels' solo durations explain.
    pub timeline_solo: f64,
    /// Covered milliseconds another tenant covered too, as a fraction of its covered ones.
    pub contended: f64,
    /// Its own time by the timeline, every contended millisecond split by solo durations
    /// (the rule before this one; kept to compare).
    pub own_by_solo: f64,
    /// Its own time by the timeline, as the split now takes it.
    pub own: f64,
    /// `spans` × (`own` / `timeline_covered`), or `own` from a probe tracing in duty cycles:
    /// the share before the device's cap.
    pub share: f64,
}

/// Each process's share before the device's cap, with the stages behind it; `None` unless
/// every process has a timeline of one length and enough milliseconds all of them traced.
pub fn time_sliced_shares(
    probed: &[(u32, f64)],
    timelines: &HashMap<u32, ProbeTimeline>,
    sampled: &[u32],
) -> Option<Vec<(u32, ProbeStages)>> {
    let lines: Vec<&ProbeTimeline> = probed
        .iter()
        .map(|(pid, _)| timelines.get(pid))
        .collect::<Option<_>>()?;
    let len = lines.first()?.covered.len();
    if len == 0
        || lines
            .iter()
            .any(|l| l.covered.len() != len || l.solo.len() != len || l.traced.len() != len)
    {
        return None;
    }
    let n = lines.len();
    let (mut covered, mut solo, mut own, mut own_by_solo) =
        (vec![0.0; n], vec![0.0; n], vec![0.0; n], vec![0.0; n]);
    let (mut covered_ms, mut contended_ms) = (vec![0.0; n], vec![0.0; n]);
    let mut common = 0usize;
    // Only milliseconds every tenant traced can be split: probes tracing in duty cycles share
    // their slots (the schedule nests), and the shares are over those milliseconds.
    for k in (0..len).filter(|k| lines.iter().all(|l| l.traced[*k])) {
        common += 1;
        let cov_sum: f64 = lines.iter().map(|l| l.covered[k]).sum();
        let solo_sum: f64 = lines.iter().map(|l| l.solo[k]).sum();
        for (i, l) in lines.iter().enumerate() {
            let c = l.covered[k];
            if c <= 0.0 {
                continue;
            }
            covered[i] += c;
            solo[i] += l.solo[k];
            covered_ms[i] += 1.0;
            let by_solo = l.solo[k] / solo_sum.max(1.0);
            if cov_sum - c > 0.0 {
                contended_ms[i] += 1.0;
                own_by_solo[i] += by_solo;
                own[i] += if cov_sum <= 1.0 { c } else { by_solo };
            } else {
                own_by_solo[i] += c;
                own[i] += c;
            }
        }
    }
    if common < MIN_COMMON_TRACED_MS {
        return None;
    }
    let per = |v: f64| (v / common as f64).clamp(0.0, 1.0);
    Some(
        probed
            .iter()
            .enumerate()
            .map(|(i, (pid, spans))| {
                let fraction = if covered_ms[i] >= MIN_COVERED_MS {
                    (own[i] / covered[i]).clamp(0.0, 1.0)
                } else {
                    1.0
                };
                let stages = ProbeStages {
                    spans: *spans,
                    timeline_covered: per(covered[i]),
                    timeline_solo: per(solo[i]),
                    contended: if covered_ms[i] > 0.0 {
                        contended_ms[i] / covered_ms[i]
                    } else {
                        0.0
                    },
                    own_by_solo: per(own_by_solo[i]),
                    own: per(own[i]),
                    share: if sampled.contains(pid) {
                        per(own[i])
                    } else {
                        (spans * fraction).clamp(0.0, 1.0)
                    },
                };
                (*pid, stages)
            })
            .collect(),
    )
}

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
//! * past the millisecond, spans overlap: a kernel was stretched over another's slice. Each
//!   process gets what its kernels' solo durations explain (times what its estimates missed
//!   where it ran alone, [`lone_scales`]), scaled to fit when they add up past the
//!   millisecond. The rest went to switching and is nobody's.
//!
//! A kernel longer than a slice covers whole milliseconds while other tenants' kernels run
//! inside them, and between those kernels it holds the context switches and the slices others
//! kept without running a kernel, which no record shows. Its span says nothing of its own time
//! there; its solo durations do, where the estimate is a run that was not stretched. On the
//! H200 under real load (the heavy corpus: encoders, GEMM streams and training steps
//! at 0.1-0.6 of the device each, the device 50-100 % busy) every kernel-bound tenant's spans
//! held others' kernels in 27-83 % of its covered time, and its solo parts, keyed by graph node
//! or by the kernels launched before it (`crates/probe/src/solo.rs`), read −4 % to +7 % of the
//! clock-corrected truth (median) where its spans read +60 % to +80 %. So such a process, marked
//! ([`Held::outlasts_slices`], [`HELD_SHARE`]), gets what its solo durations explain, as every
//! tenant does in a contended millisecond, with a floor (each kernel at most its estimate) and
//! a ceiling (its coverage less what the others' floors must have run there). Only where the
//! timelines cannot split the device (too few milliseconds every tenant traced) is its share
//! withheld: its spans alone would count others' slices. Under MPS kernels run side by side
//! and nothing is held: see [`timeline_shares`].
//!
//! Every share the timelines give is read over their window, the milliseconds every tenant
//! traced, 2 s behind the probes' clock: one window for all tenants of the device. (Until issue
//! 42 a probe that traced the whole window took its span total over the reports' window times
//! the timeline's fraction, which mixed two windows of bursty tenants: on the H200 it read heavy
//! tenants −30 % to +36 %, 5th to 95th percentile, against −12 % to +16 % for the timeline's
//! own figure over its window. It guarded against records arriving after the lag; the
//! timelines as tessera read them covered what the full record logs did, within a per cent.)

use std::collections::HashMap;

use serde::Serialize;

use super::sampling::ratio_margin;

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
    /// Of `solo`, what the kernels count at most their estimates (wire version 4): what the
    /// solo durations explain for certain, which the bounds take. Empty: the solo parts.
    pub floor: Vec<f64>,
}

impl ProbeTimeline {
    /// The floor of millisecond `k` (its solo part where the probe sent none).
    pub fn floor_at(&self, k: usize) -> f64 {
        let solo = self.solo.get(k).copied().unwrap_or(0.0);
        self.floor.get(k).map_or(solo, |f| f.min(solo))
    }
}

/// Fewer milliseconds traced by every tenant than this, and the timelines say too little.
pub const MIN_COMMON_TRACED_MS: usize = 50;

/// A millisecond a process's spans cover at least this much of is wholly inside its kernels:
/// another tenant's kernel in it ran while the process's kernel was stretched around it.
const WHOLE_MS: f64 = 0.99;
/// A process whose spans held other tenants' kernels for this share of its covered time or more
/// has its share withheld: the switching inside those spans is unknown and, measured on the
/// H100 (0.1–0.2 ms per interruption of a 12-ms matmul), exceeds the 10 % a share must be
/// right to. Tenants of short kernels stay far below: CUDA-graph tenants under contention had
/// spans past a millisecond in at most 0.1 % of theirs; by the record log, a micro-kernel tenant
/// beside that matmul held others in 0.6 % of its covered time, the matmul in 36 %.
pub const HELD_SHARE: f64 = 0.10;
/// Fewer whole milliseconds held than this and the mark says too little.
const MIN_HELD_MS: f64 = 5.0;
/// A process's solo estimates are checked against its own spans only over at least this many
/// milliseconds' worth of time it ran alone ([`lone_scales`]).
const MIN_LONE_COVERED_MS: f64 = 50.0;
/// At most this much does a process's record alone scale its solo parts: a little short of
/// the stretch past which its point figure is withheld anyway (evidence's
/// `STRETCH_TOLERANCE`, 0.35 of its lone span time unexplained, a scale of 1.54).
const MAX_LONE_SCALE: f64 = 1.5;

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
    /// How far its kernels' spans ran past their solo estimates in the milliseconds it ran
    /// alone (1: not at all, or too few such milliseconds to say): the scale its solo parts
    /// take where it shared a millisecond under time-slicing ([`lone_scales`]).
    pub lone_scale: f64,
    /// The same from the kernels' floors (each at most its estimate): the lower bound.
    pub floor_own: f64,
    /// Its covered time less what the others' floors must have run in the same milliseconds
    /// (time-slicing runs one context at a time), never below its own solo part: the upper
    /// bound. Under MPS, where kernels run side by side, its covered time.
    pub ceiling: f64,
    /// How far `floor_own` may be from the whole window's where the milliseconds every tenant
    /// traced are a sample of it (a probe tracing in duty cycles): [`ratio_margin`] of its own
    /// per-millisecond parts, 0 where every millisecond was traced, `None` where the sample is
    /// too thin to give one. The bounds widened by the coverage's margin before, and a span
    /// stretched by others' slices varies far more from one millisecond to the next than what
    /// its solo durations explain: on the H200 (`replay.py --margins` over the corpus's
    /// sampled reads) widths 0.136 and 0.171 became 0.092 and 0.128, holding
    /// the truth as often (44 of 44; 168 and 169 of 170).
    pub floor_margin: Option<f64>,
    /// The same for `ceiling`: under MPS, where the ceiling is the covered time, the coverage's.
    pub ceiling_margin: Option<f64>,
    /// Its share: `own` over the milliseconds every tenant traced, the window all the
    /// timelines share.
    pub share: f64,
    /// Of its covered time (in milliseconds another tenant traced too), the part in
    /// milliseconds its spans covered whole while another tenant's kernels ran in them: its
    /// kernels outlast a time slice there ([`held_by_others`]).
    pub holds_others: f64,
    /// Those milliseconds, counted.
    pub held_ms: f64,
}

/// How much of a process's covered time its spans held other tenants' kernels.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize)]
pub struct Held {
    /// Of its covered time in milliseconds another tenant traced too, the part in milliseconds
    /// its spans covered whole while that tenant's kernels ran in them.
    pub share: f64,
    /// Those milliseconds, counted.
    pub ms: f64,
}

impl Held {
    /// Whether its kernels outlast time slices often enough that its span total holds other
    /// tenants' slices and the switches between them, which no record measures: its share
    /// is not knowable from the probes.
    pub fn outlasts_slices(&self) -> bool {
        self.ms >= MIN_HELD_MS && self.share >= HELD_SHARE
    }
}

/// The timelines of `probed`, in its order, when every process has one and all are of one
/// length: only then do they stand side by side.
pub fn aligned<'a>(
    probed: &[(u32, f64)],
    timelines: &'a HashMap<u32, ProbeTimeline>,
) -> Option<Vec<&'a ProbeTimeline>> {
    let lines: Vec<&ProbeTimeline> = probed
        .iter()
        .map(|(pid, _)| timelines.get(pid))
        .collect::<Option<_>>()?;
    let len = lines.first()?.covered.len();
    let whole =
        |l: &&ProbeTimeline| l.covered.len() == len && l.solo.len() == len && l.traced.len() == len;
    (len > 0 && lines.iter().all(whole)).then_some(lines)
}

/// For each timeline, what its spans held of other tenants' kernels. Read over every
/// millisecond the process traced beside at least one other tenant that traced it, not only
/// those every tenant traced: probes in duty cycles of a few per cent leave too few of those
/// to split by (six tenants on the H100: 6 of 7 windows), and a kernel that outlasts time
/// slices must be withheld there too, where the spans are all there is.
pub fn held_by_others(lines: &[&ProbeTimeline]) -> Vec<Held> {
    let len = lines.iter().map(|l| l.covered.len()).min().unwrap_or(0);
    let mut out = vec![Held::default(); lines.len()];
    let mut seen = vec![0.0; lines.len()];
    for k in 0..len {
        let traced: Vec<usize> = (0..lines.len())
            .filter(|i| lines[*i].traced.get(k) == Some(&true))
            .collect();
        if traced.len() < 2 {
            continue;
        }
        for &i in &traced {
            let c = lines[i].covered[k];
            if c <= 0.0 {
                continue;
            }
            seen[i] += c;
            let others_ran = traced.iter().any(|&j| j != i && lines[j].covered[k] > 0.0);
            if c >= WHOLE_MS && others_ran {
                out[i].share += c;
                out[i].ms += 1.0;
            }
        }
    }
    for (h, seen) in out.iter_mut().zip(seen) {
        h.share = if seen > 0.0 { h.share / seen } else { 0.0 };
    }
    out
}

/// Each process's share before the device's cap, with the stages behind it; `lines` are
/// `probed`'s timelines ([`aligned`]) and `held` what [`held_by_others`] read of them. `None`
/// unless enough milliseconds were traced by every process.
///
/// `side_by_side`: the device runs several processes' kernels at once (MPS). A millisecond
/// another process's kernels ran in too is not split: each process's kernels shared the SMs
/// and ran longer than alone, so each counts what its kernels' solo durations explain, which
/// is the GPU time its work took. Measured on the H100 (docs/validation.md), spans
/// under MPS read up to 5.3 points above the tenants' kernel time, solo durations −2.7 to +1.8.
pub fn timeline_shares(
    probed: &[(u32, f64)],
    lines: &[&ProbeTimeline],
    held: &[Held],
    side_by_side: bool,
) -> Option<Vec<(u32, ProbeStages)>> {
    let len = lines.first()?.covered.len();
    let n = lines.len();
    let zeros = || vec![0.0; n];
    let (mut covered, mut solo, mut own, mut own_by_solo) = (zeros(), zeros(), zeros(), zeros());
    let (mut floor_own, mut ceiling) = (zeros(), zeros());
    let (mut covered_ms, mut contended_ms) = (zeros(), zeros());
    let mut common = 0usize;
    // Each millisecond's part of every tenant's floor and ceiling, for their sampling margins.
    let mut traced_by_all = vec![false; len];
    let (mut floor_parts, mut ceiling_parts) = (vec![vec![0.0; len]; n], vec![vec![0.0; len]; n]);
    let scales = if side_by_side {
        vec![1.0; n]
    } else {
        lone_scales(lines, held)
    };
    // Only milliseconds every tenant traced can be split: probes tracing in duty cycles share
    // their slots (the schedule nests), and the shares are over those milliseconds.
    for k in (0..len).filter(|k| lines.iter().all(|l| l.traced[*k])) {
        common += 1;
        traced_by_all[k] = true;
        let cov_sum: f64 = lines.iter().map(|l| l.covered[k]).sum();
        let solo_sum: f64 = lines.iter().map(|l| l.solo[k]).sum();
        let scaled_sum: f64 = lines
            .iter()
            .zip(&scales)
            .map(|(l, r)| (l.solo[k] * r).min(l.covered[k]))
            .sum();
        let floor_sum: f64 = lines.iter().map(|l| l.floor_at(k)).sum();
        for (i, l) in lines.iter().enumerate() {
            let c = l.covered[k];
            if c <= 0.0 {
                continue;
            }
            let (s, f) = (l.solo[k].min(c), l.floor_at(k).min(c));
            covered[i] += c;
            solo[i] += s;
            covered_ms[i] += 1.0;
            let by_solo = s / solo_sum.max(1.0);
            let (low, high) = if cov_sum - c > 0.0 {
                contended_ms[i] += 1.0;
                own_by_solo[i] += by_solo;
                if side_by_side {
                    own[i] += s;
                    (f, c)
                } else {
                    let scaled = (s * scales[i]).min(c) / scaled_sum.max(1.0);
                    own[i] += if cov_sum <= 1.0 { c } else { scaled };
                    let low = if cov_sum <= 1.0 {
                        c
                    } else {
                        f / floor_sum.max(1.0)
                    };
                    (low, c.min(s.max(1.0 - (floor_sum - f))))
                }
            } else {
                // Alone in the millisecond: its span is its own unless someone the probes do
                // not show ran in it, which the floor leaves out (a stretch past the solo parts
                // is `bounds_only`'s and `stretched-alone`'s to judge).
                own_by_solo[i] += c;
                own[i] += c;
                (f, c)
            };
            floor_own[i] += low;
            ceiling[i] += high;
            floor_parts[i][k] = low;
            ceiling_parts[i][k] = high;
        }
    }
    if common < MIN_COMMON_TRACED_MS {
        return None;
    }
    let per = |v: f64| (v / common as f64).clamp(0.0, 1.0);
    let margin = |parts: &[f64]| ratio_margin(len, |k| traced_by_all[k], |_| 1.0, |k| parts[k]);
    Some(
        probed
            .iter()
            .enumerate()
            .map(|(i, (pid, spans))| {
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
                    lone_scale: scales[i],
                    floor_own: per(floor_own[i]).min(per(own[i])),
                    ceiling: per(ceiling[i]).max(per(own[i])),
                    floor_margin: margin(&floor_parts[i]),
                    ceiling_margin: margin(&ceiling_parts[i]),
                    share: per(own[i]),
                    holds_others: held.get(i).map_or(0.0, |h| h.share),
                    held_ms: held.get(i).map_or(0.0, |h| h.ms),
                };
                (*pid, stages)
            })
            .collect(),
    )
}

/// Per timeline, its covered time over what its solo parts explain in the milliseconds every
/// tenant traced and it alone covered, within `1..=`[`MAX_LONE_SCALE`]; 1 with fewer than
/// [`MIN_LONE_COVERED_MS`] of them. Alone, nobody else's slice is in a span: what the solo
/// estimates miss there is their own error, and a shared millisecond's split takes each
/// tenant's solo parts scaled by it. resnet50 served at batches 32–128 runs kernels of one shape
/// whose durations differ with the batch: their estimates (the runs near the fastest) read its
/// shared milliseconds 7 % low (median, H200, the corpus replayed over the published
/// windows), scaled −1.5 %; a GEMM stream and CUDA-graph encoders read 1.01–1.15 and moved
/// under a per cent, an eager encoder 1.16 (+4.1 % to +8.7 %).
///
/// A process whose kernels outlast time slices (`held`, [`Held::outlasts_slices`]) is read
/// without the milliseconds of its spread kernels ([`unspread_lone_time`]): a kernel that other
/// tenants' slices interrupted covers whole milliseconds while its probe spreads its solo
/// duration evenly over the span, so every millisecond of it, alone or not, reads the others'
/// slices (their switches, and the rest of a slice in which they launched nothing) as its own
/// stretch. Measured on the H200: 16k bf16 GEMMs (~12 ms) beside an eager decoder read 1.4–1.5
/// over their lone milliseconds, which took the GEMM from within a per cent (median) to +10 %
/// and the decoder down by as much; resnet50 at batches 32–128, whose shorter kernels of one
/// shape are not spread, keeps its scale (1.14–1.2, the same over runs no co-tenant touched).
pub fn lone_scales(lines: &[&ProbeTimeline], held: &[Held]) -> Vec<f64> {
    let lone = lone_time(lines);
    let unspread = unspread_lone_time(lines);
    (0..lines.len())
        .map(|i| {
            let outlasts = held.get(i).is_some_and(Held::outlasts_slices);
            let (c, s) = if outlasts {
                (unspread.covered[i], unspread.solo[i])
            } else {
                (lone.covered[i], lone.solo[i])
            };
            if c < MIN_LONE_COVERED_MS || s <= 0.0 {
                1.0
            } else {
                (c / s).clamp(1.0, MAX_LONE_SCALE)
            }
        })
        .collect()
}

/// Per timeline, its covered time (and what its solo parts explain there) in its clean runs:
/// runs of consecutive milliseconds it covered, every tenant traced, and no other tenant
/// covered, in the run or in the millisecond either side of it. A kernel interrupted by
/// another context's slice shares its run with that context's kernels, so a clean run holds
/// only kernels that ran undisturbed.
pub fn clean_lone_time(lines: &[&ProbeTimeline]) -> LoneTime {
    let len = lines.iter().map(|l| l.covered.len()).min().unwrap_or(0);
    let n = lines.len();
    let mut out = LoneTime {
        covered: vec![0.0; n],
        solo: vec![0.0; n],
        common: 0,
    };
    let all_traced = |k: usize| {
        lines
            .iter()
            .all(|l| l.traced.get(k) == Some(&true) && l.solo.len() > k)
    };
    let others_covered = |i: usize, k: usize| {
        (0..n).any(|j| j != i && lines[j].covered.get(k).is_some_and(|c| *c > 0.0))
    };
    out.common = (0..len).filter(|k| all_traced(*k)).count();
    for (i, line) in lines.iter().enumerate() {
        let mut k = 0;
        while k < len {
            if line.covered[k] <= 0.0 {
                k += 1;
                continue;
            }
            let start = k;
            while k < len && line.covered[k] > 0.0 {
                k += 1;
            }
            // The run is [start, k); the millisecond either side must be free of others too.
            let from = start.saturating_sub(1);
            let to = (k + 1).min(len);
            let clean = (from..to).all(|m| all_traced(m) && !others_covered(i, m));
            if clean {
                for m in start..k {
                    let c = line.covered[m];
                    out.covered[i] += c;
                    out.solo[i] += line.solo[m].min(c).max(0.0);
                }
            }
        }
    }
    out
}

/// A run of at least this many whole milliseconds with one solo part, short of the millisecond,
/// is one kernel spread over a span others' slices stretched.
const SPREAD_MS: usize = 3;
/// Solo parts this close are one kernel's spread (the wire carries them in thousandths).
const SPREAD_TOLERANCE: f64 = 0.002;

/// Whether each millisecond of `line` lies inside a spread kernel: a run of [`SPREAD_MS`] or
/// more whole milliseconds whose solo parts are one value short of the millisecond.
fn spread(line: &ProbeTimeline, len: usize) -> Vec<bool> {
    let mut out = vec![false; len];
    let whole = |k: usize| line.covered[k] >= WHOLE_MS;
    let mut k = 0;
    while k < len {
        if !whole(k) || line.solo[k] >= WHOLE_MS {
            k += 1;
            continue;
        }
        let (start, s) = (k, line.solo[k]);
        while k < len && whole(k) && (line.solo[k] - s).abs() <= SPREAD_TOLERANCE {
            k += 1;
        }
        if k - start >= SPREAD_MS {
            out[start..k].iter_mut().for_each(|m| *m = true);
        }
    }
    out
}

/// [`lone_time`] without each timeline's spread kernels ([`spread`]).
pub fn unspread_lone_time(lines: &[&ProbeTimeline]) -> LoneTime {
    let len = lines
        .iter()
        .map(|l| l.covered.len().min(l.solo.len()))
        .min()
        .unwrap_or(0);
    let spreads: Vec<Vec<bool>> = lines.iter().map(|l| spread(l, len)).collect();
    lone_time_counting(lines, |i, k| spreads[i].get(k) != Some(&true))
}

/// Time the timelines show each process running alone, in milliseconds.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct LoneTime {
    /// Per timeline, its covered time in the milliseconds it alone covered.
    pub covered: Vec<f64>,
    /// Of that, what its solo parts explain.
    pub solo: Vec<f64>,
    /// The milliseconds every timeline traced, the ones alone among them.
    pub common: usize,
}

/// Over the milliseconds every timeline traced, those exactly one covered: its covered time
/// there and what its solo parts explain, per timeline.
pub fn lone_time(lines: &[&ProbeTimeline]) -> LoneTime {
    lone_time_counting(lines, |_, _| true)
}

/// [`lone_time`] over the milliseconds `counts(timeline, millisecond)` keeps; every
/// millisecond all timelines traced still counts as common.
fn lone_time_counting(lines: &[&ProbeTimeline], counts: impl Fn(usize, usize) -> bool) -> LoneTime {
    let len = lines.iter().map(|l| l.covered.len()).min().unwrap_or(0);
    let mut out = LoneTime {
        covered: vec![0.0; lines.len()],
        solo: vec![0.0; lines.len()],
        common: 0,
    };
    for k in 0..len {
        let traced = lines
            .iter()
            .all(|l| l.traced.get(k) == Some(&true) && l.solo.len() > k);
        if !traced {
            continue;
        }
        out.common += 1;
        let mut by = lines.iter().enumerate().filter(|(_, l)| l.covered[k] > 0.0);
        if let (Some((i, one)), None) = (by.next(), by.next()) {
            if counts(i, k) {
                let c = one.covered[k];
                out.covered[i] += c;
                out.solo[i] += one.solo[k].min(c).max(0.0);
            }
        }
    }
    out
}

/// Time-slicing runs one context at a time, so in a millisecond the tenants' solo parts add
/// up to at most the millisecond. Past it is what no honest timeline shows beyond the solo
/// estimates' spread: over the milliseconds every tenant traced, the share of them the solo
/// parts ran past the millisecond. Measured on the H200 (the heavy corpus replayed: 220
/// reads of honest heavy draws): at most 0.024; one tenant's timeline forged
/// 1.2× or 1.5× moved it past that in 16-26 % and 39-67 % of reads. `None` with too few
/// common milliseconds.
pub fn solo_excess(lines: &[&ProbeTimeline], held: &[Held]) -> Option<f64> {
    let len = lines.iter().map(|l| l.covered.len()).min()?;
    // Where kernels outlast time slices, each one's solo duration is spread evenly over a span
    // that holds others' slices, so two interrupted kernels both show solo parts in the same
    // milliseconds though only one ran in each: honest draws of 16k GEMMs beside a CUDA-graph
    // encoder (H200) read 0.05–0.12 per millisecond and were disputed in every read. What is
    // true of every millisecond is true of a block of them: the solo parts there add up to at
    // most the block, and a span rarely crosses its edge.
    let block = if held.iter().any(Held::outlasts_slices) {
        SOLO_EXCESS_BLOCK_MS
    } else {
        1
    };
    let (mut excess, mut common) = (0.0, 0usize);
    let mut k = 0;
    while k < len {
        let end = (k + block).min(len);
        let (mut sum, mut ms) = (0.0, 0usize);
        for m in (k..end).filter(|m| lines.iter().all(|l| l.traced.get(*m) == Some(&true))) {
            ms += 1;
            sum += lines
                .iter()
                .map(|l| l.solo[m].min(l.covered[m]))
                .sum::<f64>();
        }
        common += ms;
        excess += (sum - ms as f64).max(0.0);
        k = end;
    }
    (common >= MIN_COMMON_TRACED_MS).then(|| excess / common as f64)
}

/// The milliseconds [`solo_excess`] sums together where kernels outlast time slices: several
/// spans of the longest kernels measured (12 ms, stretched to 20–30 ms by others' slices).
const SOLO_EXCESS_BLOCK_MS: usize = 100;

/// What the split did with kernels that outlast time slices, if any did: with timelines, a
/// figure from their solo durations; without, withheld.
pub fn outlasting_why<'a>(
    held: impl IntoIterator<Item = (&'a u32, &'a Held)>,
    from_timelines: bool,
) -> Option<String> {
    let held: Vec<String> = held
        .into_iter()
        .filter(|(_, h)| h.outlasts_slices())
        .map(|(pid, h)| format!("pid {pid} {:.0} %", h.share * 100.0))
        .collect();
    (!held.is_empty()).then(|| {
        if from_timelines {
            format!(
                "kernels outlast time slices and held other tenants' kernels ({} of its covered \
                 time): its figure is what its kernels' solo durations explain, its bounds its \
                 floors and its covered time less what the others' kernels ran there",
                held.join(", ")
            )
        } else {
            format!(
                "withheld where kernels outlast time slices and held other tenants' kernels ({} \
                 of its covered time), and too few milliseconds were traced by every tenant for \
                 the timelines to split the device: such spans hold switches no record measures",
                held.join(", ")
            )
        }
    })
}

#[cfg(test)]
#[path = "timeslice_tests.rs"]
mod tests;

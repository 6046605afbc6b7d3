//! Receives the CUDA probe's counters (`crates/probe`) on a UNIX stream socket (`socket`) and
//! keeps them per process for the sampler (`ProbeBook`).
//!
//! Each workload process that carries the probe connects once and sends, once a second, a
//! frame: a fixed header with its cumulative kernel busy time, kernel count and traced time,
//! then a bounded run of per-millisecond timeline buckets (`tessera_probe::wire`). The
//! sender's PID is not taken from the frame: the kernel attests it (`SO_PEERCRED`, in
//! tessera's PID namespace, which is the host's with `hostPID`), so a process can speak only
//! for itself. Counters of PIDs NVML does not list on a GPU are never shown, and their reports
//! are counted as refused (`refused`), as are malformed frames and senders past capacity.
//!
//! tessera writes one thing back: a 16-byte control message (`tessera_probe::wire::Control`)
//! when a process's device starts or stops being shared, so that its probe turns kernel
//! records on only while they buy something (`model::records`). The sampler decides
//! (`ProbeBook::set_shared`); each connection's writer task sends.

mod options;
mod refused;
mod socket;

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::model::compute::{ProbeReading, ProbeTimeline};

pub use options::{ProbeArgs, ProbeOptions};
pub use refused::{Refusal, RefusedCounts, UNLISTED_GRACE};
pub use socket::{spawn_receiver, ProbeSocketError};
pub use tessera_probe::wire::{
    Bucket, Frame, BUCKET_NS, FLAG_DISABLED, FLAG_FULL, FLAG_NO_CUPTI, FLAG_PROFILER, UNTRACED,
};

/// More connections than any node runs GPU processes; past this new ones are refused.
const MAX_CONNECTIONS: usize = 4096;
/// Reports kept per process: enough to span the window at one report a second.
const MAX_REPORTS: usize = 32;
/// A probe that reports once a second and has not for this long has stopped; its process is
/// disputed, not read as unprobed, until it is forgotten.
const SILENT_AFTER: Duration = Duration::from_secs(3);
/// A process that stopped reporting is forgotten after this.
const FORGET_AFTER: Duration = Duration::from_secs(30);
/// Timelines are read this far behind a process's latest report: kernels still running when
/// it flushed its records arrive a report or two later.
pub const TIMELINE_LAG: Duration = Duration::from_secs(2);
/// A timeline is used only if its process reported this recently (it reports every second).
const TIMELINE_FRESH: Duration = Duration::from_millis(1500);
/// A throttled probe's busy ratio needs at least this much traced time in the window.
const MIN_TRACED: Duration = Duration::from_millis(50);
/// A probe keeps kernel records on until its device has been unshared this long. Records
/// turned on once keep costing launches after they go off again (docs/validation.md), so
/// turning them off saves only their own part; turning them on again costs the window and
/// the lag without a timeline. A tenant that pauses for less than this (a data-loader
/// stall, a gap between requests) keeps its timeline.
pub const RECORDS_OFF_AFTER: Duration = Duration::from_secs(60);

/// One process's kernel timeline as received: dense buckets from `first`.
#[derive(Debug, Default)]
struct Timeline {
    first: u64,
    buckets: VecDeque<Bucket>,
    /// The probe measured every bucket from here on; earlier ones are unknown.
    complete_from: u64,
    /// The probe's clock at its latest report, and when tessera received that report.
    clock: Option<(u64, Instant)>,
    /// From a probe that marks untraced milliseconds (wire v3): a bucket never received is
    /// unknown. Older probes traced everything, and sent only buckets with kernels.
    marks_untraced: bool,
}

impl Timeline {
    /// Writes a frame's buckets in, keeping at most `keep` buckets. Buckets carry absolute
    /// values, so one sent again replaces the earlier copy; nothing a peer sends can make
    /// this hold more than `keep`.
    fn merge(&mut self, first: u64, buckets: &[Bucket], keep: usize) {
        let Some(end) = first.checked_add(buckets.len() as u64) else {
            return;
        };
        let cur_end = self.first + self.buckets.len() as u64;
        let new_end = end.max(cur_end);
        let new_first = self.first.max(new_end.saturating_sub(keep as u64));
        if new_first >= cur_end {
            self.buckets.clear();
        } else {
            self.buckets.drain(..(new_first - self.first) as usize);
        }
        self.first = new_first;
        let unknown = if self.marks_untraced {
            Bucket {
                covered_us: UNTRACED,
                ..Bucket::default()
            }
        } else {
            Bucket::default()
        };
        self.buckets
            .resize((new_end - self.first) as usize, unknown);
        for (i, b) in buckets.iter().enumerate() {
            let at = first + i as u64;
            if at >= self.first {
                self.buckets[(at - self.first) as usize] = *b;
            }
        }
    }

    /// The shared clock now by the process's latest report; `None` without a recent one.
    fn clock_now(&self, now: Instant) -> Option<u64> {
        let (clock_ns, at) = self.clock?;
        let since = now.saturating_duration_since(at);
        (since <= TIMELINE_FRESH).then(|| clock_ns.checked_add(since.as_nanos() as u64))?
    }

    /// The `len` buckets before bucket `end`, as fractions of a bucket; `None` unless the
    /// process measured all of them and reported recently.
    fn window(&self, len: usize, end: u64, now: Instant) -> Option<ProbeTimeline> {
        self.clock_now(now)?;
        let start = end.checked_sub(len as u64)?;
        if start < self.complete_from {
            return None;
        }
        let mut out = ProbeTimeline {
            covered: vec![0.0; len],
            solo: vec![0.0; len],
            traced: vec![!self.marks_untraced; len],
            floor: vec![0.0; len],
        };
        for b in start.max(self.first)..end.min(self.first + self.buckets.len() as u64) {
            let v = self.buckets[(b - self.first) as usize];
            let k = (b - start) as usize;
            if v.covered_us == UNTRACED && self.marks_untraced {
                out.traced[k] = false;
                continue;
            }
            out.traced[k] = true;
            out.covered[k] = (f64::from(v.covered_us) * 1e3 / BUCKET_NS as f64).min(1.0);
            out.solo[k] = (f64::from(v.solo_us) * 1e3 / BUCKET_NS as f64).min(out.covered[k]);
            out.floor[k] = (f64::from(v.floor_us) * 1e3 / BUCKET_NS as f64).min(out.solo[k]);
        }
        Some(out)
    }
}

/// One report as filed.
#[derive(Debug, Clone, Copy)]
struct Report {
    at: Instant,
    busy_ns: u64,
    kernels: u64,
    /// Records the probe lost (dropped by CUPTI or handed over without timestamps).
    lost: u32,
    /// Nanoseconds traced since the probe started; `None` from probes that trace always.
    traced_ns: Option<u64>,
}

#[derive(Debug, Default)]
struct PidReports {
    reports: VecDeque<Report>,
    disabled: bool,
    /// Its latest frame said a profiler in the process holds CUPTI (with `disabled`).
    profiler: bool,
    /// Its latest frame said the probe found no CUPTI to load (with `disabled`).
    no_cupti: bool,
    /// Its latest frame carried totals only (wire version 1: no clock, no timeline).
    totals_only: bool,
    /// Only once a full frame (the first of a connection) arrived.
    timeline: Option<Timeline>,
    /// When this sender's first report arrived.
    first_at: Option<Instant>,
    /// Reports since NVML last listed the sender on a GPU (or since they were last counted
    /// as refused).
    unclaimed: u64,
}

/// What the receiver has heard, shared with the sampler thread.
#[derive(Debug, Clone)]
pub struct ProbeBook {
    inner: Arc<Mutex<HashMap<u32, PidReports>>>,
    /// The trailing window every reading and timeline is taken over (`--activity.window`).
    window: Duration,
    /// Buckets kept per process: the activity window, the lag and a second to spare.
    keep_buckets: usize,
    /// Processes whose probes should have kernel records on, and when their device was last
    /// seen shared. Only processes NVML listed on a shared device get in; each leaves
    /// `RECORDS_OFF_AFTER` after that.
    records: Arc<Mutex<HashMap<u32, Instant>>>,
    /// Bumped when `records` changes, so each connection's writer wakes.
    records_changed: Arc<tokio::sync::watch::Sender<u64>>,
    /// Reports received and not used, by why.
    refused: Arc<RefusedCounts>,
}

impl ProbeBook {
    /// A book that answers over the trailing `window`.
    pub fn new(window: Duration) -> Self {
        let keep = window + TIMELINE_LAG + Duration::from_secs(2);
        ProbeBook {
            inner: Arc::default(),
            window,
            keep_buckets: (keep.as_nanos() / u128::from(BUCKET_NS)) as usize,
            records: Arc::default(),
            records_changed: Arc::new(tokio::sync::watch::Sender::new(0)),
            refused: Arc::default(),
        }
    }

    /// Counts a report set aside before it reached the book (a malformed frame).
    pub fn refuse(&self, why: Refusal) {
        self.refused.add(why, 1);
    }

    /// Refused reports so far, by reason.
    pub fn refused(&self) -> std::collections::BTreeMap<&'static str, u64> {
        self.refused.totals()
    }

    /// Settles the reports received since the last sample against NVML's process lists:
    /// `listed` are the PIDs NVML lists on some GPU now. A listed sender's reports are the
    /// ones readings are taken from. A sender still unlisted `grace` after its first report
    /// (`UNLISTED_GRACE` or more) is on no GPU: its reports so far, and from then on each new
    /// one at the next sample, are counted as refused. They were never shown either way:
    /// readings are only asked for listed PIDs.
    pub fn settle_unlisted(&self, listed: &[u32], now: Instant, grace: Duration) {
        let Ok(mut map) = self.inner.lock() else {
            return;
        };
        let mut refused = 0;
        for (pid, r) in map.iter_mut() {
            if listed.contains(pid) {
                r.unclaimed = 0;
            } else if r
                .first_at
                .is_some_and(|t| now.saturating_duration_since(t) >= grace)
            {
                refused += std::mem::take(&mut r.unclaimed);
            }
        }
        drop(map);
        if refused > 0 {
            self.refused.add(Refusal::NoGpuProcess, refused);
        }
    }

    /// The sampler's decision at `now`: `shared` are the processes whose device has another
    /// candidate this sample. They get records at once; a process drops out once its device
    /// has been unshared for `RECORDS_OFF_AFTER`. Never blocks: each connection's writer
    /// task is woken and does the sending.
    pub fn set_shared(&self, shared: &std::collections::HashSet<u32>, now: Instant) {
        let Ok(mut records) = self.records.lock() else {
            return;
        };
        let before = records.len();
        let mut changed = false;
        records.retain(|pid, seen| {
            shared.contains(pid) || now.saturating_duration_since(*seen) < RECORDS_OFF_AFTER
        });
        changed |= records.len() != before;
        for &pid in shared {
            changed |= records.insert(pid, now).is_none();
        }
        drop(records);
        if changed {
            self.records_changed.send_modify(|g| *g = g.wrapping_add(1));
        }
    }

    /// Whether `pid`'s probe should have kernel records on.
    pub fn records_wanted(&self, pid: u32) -> bool {
        self.records.lock().is_ok_and(|r| r.contains_key(&pid))
    }

    /// Wakes when `set_shared` changed who should have records.
    pub(crate) fn watch_records(&self) -> tokio::sync::watch::Receiver<u64> {
        self.records_changed.subscribe()
    }

    /// Files one report of `pid`'s probe. The socket receiver calls it with the kernel-attested
    /// sender; the demo with its fake processes.
    pub fn record(&self, pid: u32, frame: &Frame, at: Instant) {
        let Ok(mut map) = self.inner.lock() else {
            return;
        };
        if !map.contains_key(&pid) && map.len() >= MAX_CONNECTIONS {
            drop(map);
            self.refused.add(Refusal::OverCapacity, 1);
            return;
        }
        let e = map.entry(pid).or_default();
        e.first_at.get_or_insert(at);
        e.unclaimed += 1;
        // Counters only grow within one process; a smaller one is a new process under a
        // reused PID (or a lie), and history before it means nothing.
        if e.reports
            .back()
            .is_some_and(|r| frame.busy_ns < r.busy_ns || frame.kernels < r.kernels)
        {
            e.reports.clear();
            e.timeline = None;
        }
        let disabled = frame.flags & FLAG_DISABLED != 0;
        // Records just went on (tessera said the device is shared): reports from while they
        // were off counted nothing, and a ratio across them would read the process idler.
        if e.disabled && !disabled {
            e.reports.clear();
        }
        e.disabled = disabled;
        e.profiler = disabled && frame.flags & FLAG_PROFILER != 0;
        e.no_cupti = disabled && frame.flags & FLAG_NO_CUPTI != 0;
        e.reports.push_back(Report {
            at,
            busy_ns: frame.busy_ns,
            kernels: frame.kernels,
            lost: frame.dropped.saturating_add(frame.incomplete),
            traced_ns: frame.traced_ns,
        });
        while e.reports.len() > MAX_REPORTS {
            e.reports.pop_front();
        }
        e.totals_only = frame.now_ns == 0;
        if frame.now_ns == 0 || e.disabled {
            e.timeline = None;
            return;
        }
        if frame.flags & FLAG_FULL != 0 {
            e.timeline = Some(Timeline {
                first: frame.first_bucket,
                complete_from: frame.complete_from,
                marks_untraced: frame.traced_ns.is_some(),
                ..Timeline::default()
            });
        }
        if let Some(t) = e.timeline.as_mut() {
            t.merge(frame.first_bucket, &frame.buckets, self.keep_buckets);
            t.clock = Some((frame.now_ns, at));
        }
    }

    /// Readings over the trailing window for the PIDs asked for; drops stale processes.
    pub fn readings(&self, pids: &[u32], now: Instant) -> HashMap<u32, ProbeReading> {
        let window = self.window;
        let Ok(mut map) = self.inner.lock() else {
            return HashMap::new();
        };
        map.retain(|_, r| {
            r.reports
                .back()
                .is_some_and(|last| now.saturating_duration_since(last.at) < FORGET_AFTER)
        });
        pids.iter()
            .filter_map(|pid| {
                let r = map.get(pid)?;
                let last = *r.reports.back()?;
                // A probe turned off reads as none; one whose records a profiler took, or that
                // found no CUPTI, says so, and has nothing else to say.
                if r.disabled {
                    return (r.profiler || r.no_cupti).then(|| {
                        (
                            *pid,
                            ProbeReading {
                                busy_seconds: last.busy_ns as f64 / 1e9,
                                kernels: last.kernels,
                                silent: now.saturating_duration_since(last.at) > SILENT_AFTER,
                                profiler: r.profiler,
                                no_cupti: r.no_cupti,
                                ..ProbeReading::default()
                            },
                        )
                    });
                }
                let first = r
                    .reports
                    .iter()
                    .find(|f| last.at.saturating_duration_since(f.at) <= window)
                    .copied();
                let (busy_ratio, traced_share) = first
                    .and_then(|first| ratios(&first, &last, window, now))
                    .unzip();
                let window_kernels = first
                    .filter(|_| busy_ratio.is_some())
                    .map(|first| last.kernels.saturating_sub(first.kernels));
                Some((
                    *pid,
                    ProbeReading {
                        busy_ratio,
                        traced_share: traced_share.flatten(),
                        busy_seconds: last.busy_ns as f64 / 1e9,
                        kernels: last.kernels,
                        silent: now.saturating_duration_since(last.at) > SILENT_AFTER,
                        clock_seconds: r.timeline.as_ref().and_then(|t| {
                            let (clock_ns, at) = t.clock?;
                            Some(
                                clock_ns as f64 / 1e9
                                    + now.saturating_duration_since(at).as_secs_f64(),
                            )
                        }),
                        window_kernels,
                        totals_only: r.totals_only,
                        profiler: false,
                        no_cupti: false,
                    },
                ))
            })
            .collect()
    }

    /// Each asked-for process's kernel timeline over the trailing window, ending
    /// `TIMELINE_LAG` ago by the probes' shared clock: one window, the same milliseconds, for
    /// every process. Each probe's report says where the clock is now, late by the time its
    /// report took to arrive; the window ends where the median of them says, so no one
    /// report's delay (or a lie about the clock, which `clock` disputes past 0.25 s) moves the
    /// others' milliseconds against each other. (Placed by each report alone, timelines of
    /// honest heavy tenants on the H200 stood a few milliseconds apart, slices seemed to
    /// overlap, and `solo-excess` disputed 6-10 % of honest reads.)
    pub fn timelines(&self, pids: &[u32], now: Instant) -> HashMap<u32, ProbeTimeline> {
        let window = self.window;
        let Ok(map) = self.inner.lock() else {
            return HashMap::new();
        };
        let len = ((window.as_nanos() / u128::from(BUCKET_NS)) as usize).min(self.keep_buckets);
        let line = |pid: &u32| {
            let r = map.get(pid)?;
            r.timeline.as_ref().filter(|_| !r.disabled)
        };
        let mut clocks: Vec<u64> = pids
            .iter()
            .filter_map(|pid| line(pid)?.clock_now(now))
            .collect();
        clocks.sort_unstable();
        let Some(end) = clocks
            .get(clocks.len() / 2)
            .and_then(|c| c.checked_sub(TIMELINE_LAG.as_nanos() as u64))
            .map(|c| c / BUCKET_NS)
        else {
            return HashMap::new();
        };
        pids.iter()
            .filter_map(|pid| Some((*pid, line(pid)?.window(len, end, now)?)))
            .collect()
    }
}

/// The busy ratio between two reports, and the share of that time the probe traced (`None`
/// from a probe that traces always). A throttled probe's busy time is over its traced time:
/// a sample of the window, not all of it.
fn ratios(
    first: &Report,
    last: &Report,
    window: Duration,
    now: Instant,
) -> Option<(f64, Option<f64>)> {
    let dt = last.at.saturating_duration_since(first.at).as_secs_f64();
    // Reports that span most of the window (one a second: all but the second or so before
    // the first), the newest one recent, and no records lost between them (the spans would
    // miss time: an undercount). A probe whose records just went on has no such span yet:
    // measured on the H100, its first second or two of records read a busy tenant as low as
    // 0, while CUPTI's delivery catches up.
    let min_span = (window.as_secs_f64() - 1.5).max(1.0);
    if dt < min_span || now.saturating_duration_since(last.at) > window || last.lost != first.lost {
        return None;
    }
    let busy = last.busy_ns.saturating_sub(first.busy_ns) as f64 / 1e9;
    match (first.traced_ns, last.traced_ns) {
        (Some(t0), Some(t1)) => {
            let traced = t1.saturating_sub(t0);
            (traced >= MIN_TRACED.as_nanos() as u64).then(|| {
                let traced = traced as f64 / 1e9;
                (
                    (busy / traced).clamp(0.0, 1.0),
                    Some((traced / dt).clamp(0.0, 1.0)),
                )
            })
        }
        _ => Some(((busy / dt).clamp(0.0, 1.0), None)),
    }
}

#[cfg(test)]
mod tests;

//! Receives the CUDA probe's counters (`crates/probe`) on a UNIX stream socket (`socket`) and
//! keeps them per process for the sampler (`ProbeBook`).
//!
//! Each workload process that carries the probe connects once and sends, once a second, a
//! frame: a fixed header with its cumulative kernel busy time, kernel count and traced time,
//! then a bounded run of per-millisecond timeline buckets (`tessera_probe::wire`). The
//! sender's PID is not taken from the frame: the kernel attests it (`SO_PEERCRED`, in
//! tessera's PID namespace, which is the host's with `hostPID`), so a process can speak only
//! for itself. Counters of PIDs NVML does not list on a GPU are never shown.
//!
//! tessera writes one thing back: a 16-byte control message (`tessera_probe::wire::Control`)
//! when a process's device starts or stops being shared, so that its probe turns kernel
//! records on only while they buy something (`model::records`). The sampler decides
//! (`ProbeBook::set_shared`); each connection's writer task sends.

mod options;
mod socket;

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::model::compute::{ProbeReading, ProbeTimeline};

pub use options::ProbeArgs;
pub use socket::{spawn_receiver, ProbeSocketError};
pub use tessera_probe::wire::{Bucket, Frame, BUCKET_NS, FLAG_DISABLED, FLAG_FULL, UNTRACED};

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
const TIMELINE_LAG: Duration = Duration::from_secs(2);
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
                solo_us: 0,
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

    /// The `len` buckets ending `lag` before the process's clock now, as fractions of a
    /// bucket; `None` unless the process measured all of them and reported recently.
    fn window(&self, len: usize, lag: Duration, now: Instant) -> Option<ProbeTimeline> {
        let (clock_ns, at) = self.clock?;
        let since = now.saturating_duration_since(at);
        if since > TIMELINE_FRESH {
            return None;
        }
        let end_ns = clock_ns
            .checked_add(since.as_nanos() as u64)?
            .checked_sub(lag.as_nanos() as u64)?;
        let end = end_ns / BUCKET_NS;
        let start = end.checked_sub(len as u64)?;
        if start < self.complete_from {
            return None;
        }
        let mut out = ProbeTimeline {
            covered: vec![0.0; len],
            solo: vec![0.0; len],
            traced: vec![!self.marks_untraced; len],
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
    /// Only once a full frame (the first of a connection) arrived.
    timeline: Option<Timeline>,
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
            return;
        }
        let e = map.entry(pid).or_default();
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
                if r.disabled {
                    return None;
                }
                let last = *r.reports.back()?;
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
                    },
                ))
            })
            .collect()
    }

    /// Each asked-for process's kernel timeline over the trailing window, ending
    /// `TIMELINE_LAG` ago by the probes' shared clock. Every process places the window by its
    /// own latest report, so one that misstates its clock misplaces only its own timeline.
    pub fn timelines(&self, pids: &[u32], now: Instant) -> HashMap<u32, ProbeTimeline> {
        let window = self.window;
        let Ok(map) = self.inner.lock() else {
            return HashMap::new();
        };
        let len = ((window.as_nanos() / u128::from(BUCKET_NS)) as usize).min(self.keep_buckets);
        pids.iter()
            .filter_map(|pid| {
                let r = map.get(pid)?;
                let t = r.timeline.as_ref().filter(|_| !r.disabled)?;
                Some((*pid, t.window(len, TIMELINE_LAG, now)?))
            })
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
mod tests {
    use super::*;

    /// A version-1 report: totals only. The socket's tests send it too.
    pub(super) fn frame(busy_ms: u64, kernels: u64) -> Frame {
        Frame {
            busy_ns: busy_ms * 1_000_000,
            kernels,
            ..Frame::default()
        }
    }

    #[test]
    fn busy_ratio_over_the_window_and_a_reused_pid_restarts() {
        let book = ProbeBook::new(Duration::from_secs(5));
        let t0 = Instant::now();
        for s in 0..=6u64 {
            book.record(7, &frame(400 * s, 10 * s), t0 + Duration::from_secs(s));
        }
        let now = t0 + Duration::from_secs(6);
        let r = book.readings(&[7, 8], now);
        assert_eq!(r.len(), 1, "pid 8 never reported");
        let r7 = r[&7];
        assert!((r7.busy_ratio.unwrap() - 0.4).abs() < 1e-9);
        assert_eq!(r7.kernels, 60);
        assert_eq!(r7.window_kernels, Some(50), "reports 1 s ..= 6 s");
        // A smaller counter: history is dropped, no ratio until a second report.
        book.record(7, &frame(10, 1), now + Duration::from_secs(1));
        let r = book.readings(&[7], now + Duration::from_secs(1));
        assert_eq!(r[&7].busy_ratio, None);
        // Silent for longer than the window: no ratio; longer still: forgotten.
        let later = now + Duration::from_secs(40);
        assert!(book.readings(&[7], later).is_empty());
    }

    #[test]
    fn lost_records_withhold_the_ratio_until_the_window_is_clean() {
        let book = ProbeBook::new(Duration::from_secs(5));
        let t0 = Instant::now();
        for s in 0..=3u64 {
            let mut f = frame(400 * s, 10 * s);
            f.dropped = if s >= 2 { 5 } else { 0 };
            book.record(7, &f, t0 + Duration::from_secs(s));
        }
        let r = book.readings(&[7], t0 + Duration::from_secs(3));
        assert_eq!(
            r[&7].busy_ratio, None,
            "records were lost inside the window"
        );
        // Once the loss is older than the window, the ratio is back.
        for s in 4..=9u64 {
            let mut f = frame(400 * s, 10 * s);
            f.dropped = 5;
            book.record(7, &f, t0 + Duration::from_secs(s));
        }
        let r = book.readings(&[7], t0 + Duration::from_secs(9));
        assert!((r[&7].busy_ratio.unwrap() - 0.4).abs() < 1e-9);
    }

    #[test]
    fn records_go_on_when_shared_and_off_only_after_a_minute_unshared() {
        let book = ProbeBook::new(Duration::from_secs(5));
        let mut woken = book.watch_records();
        let t0 = Instant::now();
        let set = |pids: &[u32]| {
            pids.iter()
                .copied()
                .collect::<std::collections::HashSet<_>>()
        };
        book.set_shared(&set(&[1, 2]), t0);
        assert!(book.records_wanted(1) && book.records_wanted(2) && !book.records_wanted(3));
        assert!(woken.has_changed().unwrap());
        woken.borrow_and_update();
        // Still shared: nothing changes, nobody is woken.
        book.set_shared(&set(&[1, 2]), t0 + Duration::from_secs(1));
        assert!(!woken.has_changed().unwrap());
        // Alone from 1 s: records stay on for RECORDS_OFF_AFTER, then go off.
        let off = t0 + Duration::from_secs(1) + RECORDS_OFF_AFTER;
        book.set_shared(&set(&[]), off - Duration::from_millis(1));
        assert!(book.records_wanted(1));
        assert!(!woken.has_changed().unwrap());
        book.set_shared(&set(&[]), off);
        assert!(!book.records_wanted(1) && !book.records_wanted(2));
        assert!(woken.has_changed().unwrap());
        // A short pause inside the hysteresis keeps them on without a wake.
        book.set_shared(&set(&[1, 2]), off);
        woken.borrow_and_update();
        book.set_shared(&set(&[]), off + Duration::from_secs(5));
        book.set_shared(&set(&[1, 2]), off + Duration::from_secs(10));
        assert!(book.records_wanted(1) && !woken.has_changed().unwrap());
    }

    #[test]
    fn a_ratio_starts_when_records_go_on_not_before() {
        let book = ProbeBook::new(Duration::from_secs(5));
        let t0 = Instant::now();
        let at = |s: u64| t0 + Duration::from_secs(s);
        // Alone: records off, reported as off, for 4 s.
        for s in 0..4u64 {
            let mut f = frame(0, 0);
            f.flags = FLAG_DISABLED;
            book.record(3, &f, at(s));
        }
        // On from 4 s, 500 ms of kernels a second over the traced time; no ratio until the
        // reports since then span most of the window.
        for s in 4..=9u64 {
            let mut f = frame(500 * (s - 4), 10 * (s - 4));
            f.traced_ns = Some((s - 4) * 1_000_000_000);
            book.record(3, &f, at(s));
            let r = book.readings(&[3], at(s))[&3];
            if s < 8 {
                assert_eq!(r.busy_ratio, None, "{s}: {r:?}");
            } else {
                assert!((r.busy_ratio.unwrap() - 0.5).abs() < 1e-9, "{s}: {r:?}");
            }
        }
    }

    #[test]
    fn a_disabled_probe_says_nothing() {
        let book = ProbeBook::new(Duration::from_secs(5));
        let t0 = Instant::now();
        book.record(3, &frame(0, 0), t0);
        let mut f = frame(500, 5);
        f.flags = FLAG_DISABLED;
        book.record(3, &f, t0 + Duration::from_secs(2));
        assert!(book.readings(&[3], t0 + Duration::from_secs(2)).is_empty());
    }

    const MS: u64 = BUCKET_NS;

    fn timeline_frame(now_ms: u64, first: u64, covered: &[u16], flags: u32) -> Frame {
        Frame {
            busy_ns: now_ms * MS,
            kernels: now_ms,
            flags,
            now_ns: now_ms * MS,
            complete_from: 1_000,
            first_bucket: first,
            buckets: covered
                .iter()
                .map(|&c| Bucket {
                    covered_us: c,
                    solo_us: c / 2,
                })
                .collect(),
            ..Frame::default()
        }
    }

    #[test]
    fn timelines_are_read_behind_the_processes_clock_once_complete() {
        let book = ProbeBook::new(Duration::from_secs(2));
        let t0 = Instant::now();
        // Clock at 10 s; buckets 5000..9999 fully covered.
        book.record(
            1,
            &timeline_frame(10_000, 5_000, &[1000; 3_000], FLAG_FULL),
            t0,
        );
        let tl = book.timelines(&[1], t0);
        // The window ends 2 s behind the clock: buckets 6000..8000.
        let t = &tl[&1];
        assert_eq!(t.covered.len(), 2_000);
        assert!(t.covered.iter().all(|&c| c == 1.0));
        assert!(t.solo.iter().all(|&c| c == 0.5));
        // Half a second later by tessera's clock, the window has moved half a second on.
        let t = &book.timelines(&[1], t0 + Duration::from_millis(500))[&1];
        assert_eq!(t.covered.iter().filter(|&&c| c == 1.0).count(), 1_500);
        // Without a recent report there is no timeline.
        assert!(book.timelines(&[1], t0 + Duration::from_secs(2)).is_empty());
        // A process whose probe started inside the window has none either.
        let mut young = timeline_frame(10_000, 9_000, &[1000; 10], FLAG_FULL);
        young.complete_from = 7_000;
        book.record(2, &young, t0);
        assert!(book.timelines(&[2], t0).is_empty());
    }

    #[test]
    fn a_throttled_probe_is_read_over_its_traced_time_and_its_gaps_stay_unknown() {
        let book = ProbeBook::new(Duration::from_secs(5));
        let t0 = Instant::now();
        // Reports 1 s apart: 100 ms traced each second, 40 ms of kernels in it.
        for s in 0..=5u64 {
            let mut f = frame(40 * s, 1_000 * s);
            f.traced_ns = Some(100 * MS * s);
            book.record(4, &f, t0 + Duration::from_secs(s));
        }
        let r = book.readings(&[4], t0 + Duration::from_secs(5))[&4];
        assert!((r.busy_ratio.unwrap() - 0.4).abs() < 1e-9, "{r:?}");
        assert!((r.traced_share.unwrap() - 0.1).abs() < 1e-9, "{r:?}");
        // Too little traced time to say anything.
        let book2 = ProbeBook::new(Duration::from_secs(5));
        for s in 0..=2u64 {
            let mut f = frame(s, s);
            f.traced_ns = Some(10 * MS * s);
            book2.record(4, &f, t0 + Duration::from_secs(s));
        }
        let r = book2.readings(&[4], t0 + Duration::from_secs(2))[&4];
        assert_eq!(r.busy_ratio, None);
        // A v3 timeline: untraced buckets, and buckets never sent, are not idle.
        let book = ProbeBook::new(Duration::from_secs(2));
        let mut f = timeline_frame(10_000, 5_000, &[1000; 2_500], FLAG_FULL);
        f.traced_ns = Some(0);
        for (k, b) in f.buckets.iter_mut().enumerate() {
            if k % 2 == 1 {
                b.covered_us = UNTRACED;
            }
        }
        book.record(5, &f, t0);
        let t = &book.timelines(&[5], t0)[&5];
        assert_eq!(t.traced.len(), 2_000);
        // 6000..7500 alternate traced/untraced; 7500..8000 were never sent.
        assert_eq!(t.traced.iter().filter(|&&x| x).count(), 750);
        assert!(t.traced[1_500..].iter().all(|&x| !x));
        assert!(t.covered.iter().zip(&t.traced).all(|(c, tr)| if *tr {
            *c == 1.0
        } else {
            *c == 0.0
        }));
    }

    #[test]
    fn incremental_frames_replace_buckets_and_nothing_grows_past_the_keep() {
        let book = ProbeBook::new(Duration::from_secs(2));
        let t0 = Instant::now();
        book.record(1, &timeline_frame(9_000, 8_000, &[100; 10], FLAG_FULL), t0);
        // The same buckets again with more in them (a late record): replaced, not added.
        book.record(1, &timeline_frame(9_001, 8_000, &[300; 10], 0), t0);
        {
            let map = book.inner.lock().unwrap();
            let t = map[&1].timeline.as_ref().unwrap();
            assert_eq!(t.buckets[0].covered_us, 300);
        }
        // A hostile far-future bucket index: the kept run stays bounded.
        book.record(1, &timeline_frame(9_002, u64::MAX - 5, &[1; 5], 0), t0);
        book.record(1, &timeline_frame(9_003, 1 << 60, &[1; 5], 0), t0);
        let map = book.inner.lock().unwrap();
        let t = map[&1].timeline.as_ref().unwrap();
        assert!(t.buckets.len() <= book.keep_buckets, "{}", t.buckets.len());
    }

    #[test]
    fn a_frame_without_a_clock_or_before_a_full_one_gives_no_timeline() {
        let book = ProbeBook::new(Duration::from_secs(1));
        let t0 = Instant::now();
        // Incremental frame first (tessera missed the connection's start): ignored.
        book.record(1, &timeline_frame(10_000, 9_000, &[1000; 10], 0), t0);
        assert!(book.timelines(&[1], t0).is_empty());
        // Version 1 frames carry no clock.
        book.record(2, &frame(5, 1), t0);
        assert!(book.timelines(&[2], t0).is_empty());
    }
}

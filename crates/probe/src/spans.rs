//! Kernel busy time as the union of kernel [start, end] spans: concurrent kernels of one
//! process (several streams) must not count twice. Besides the total, the union is kept as a
//! millisecond timeline (see `wire`), with each kernel's solo-equivalent share of its span and
//! its floor (`solo::Solo`).

use std::collections::{BTreeMap, VecDeque};

use crate::wire::{Bucket, BUCKET_NS, MAX_BUCKETS, UNTRACED};

/// How far behind the newest kernel a late buffer's kernels are still placed exactly. CUPTI
/// keeps a buffer per launching thread (CUDA 12.3+) and hands each over when full or at the
/// once-a-second flush, so one thread's kernels arrive up to a flush period after another's
/// that ran beside them. Measured on the H100: a training step launches its
/// backward pass from autograd's thread, and skipping everything behind the newest span read
/// training and DDP tenants at a third of their kernel time.
const LATE_HORIZON_NS: u64 = 2_000_000_000;

/// Accumulates the union of spans that arrive in batches (one CUPTI buffer at a time).
#[derive(Debug, Default)]
pub struct Spans {
    pub busy_ns: u64,
    pub kernels: u64,
    /// End of the newest span folded in.
    pub(crate) covered_until: u64,
    /// The union so far as disjoint stretches (start → end) within [`LATE_HORIZON_NS`] of
    /// `covered_until`: a late span counts only the time none of them holds.
    pub(crate) covered: BTreeMap<u64, u64>,
    /// Scratch for a late span's uncovered parts (no allocation per kernel).
    gaps: Vec<(u64, u64)>,
    /// (start, end, solo ns, floor ns) of kernels not folded in yet.
    pub(crate) batch: Vec<(u64, u64, u64, u64)>,
    /// Bucket index → (covered ns, solo-equivalent ns, floor ns), only buckets with kernel
    /// time.
    pub(crate) timeline: BTreeMap<u64, (u32, u32, u32)>,
    /// Lowest bucket changed since the last frame.
    pub(crate) dirty_from: Option<u64>,
    /// Every bucket from here on was measured (raised when old buckets are let go).
    pub(crate) complete_from: u64,
    /// Closed stretches of CUPTI time (ns) with kernel records on, oldest first, and the start
    /// of the open one. Milliseconds outside them are sent as untraced.
    pub(crate) traced: VecDeque<(u64, u64)>,
    pub(crate) tracing_since: Option<u64>,
    /// Sum of the closed stretches, ever.
    pub(crate) traced_ns: u64,
    /// Buckets before this one went out in a frame.
    pub(crate) sent_until: u64,
}

impl Spans {
    pub const fn new() -> Self {
        Spans {
            busy_ns: 0,
            kernels: 0,
            covered_until: 0,
            covered: BTreeMap::new(),
            gaps: Vec::new(),
            batch: Vec::new(),
            timeline: BTreeMap::new(),
            dirty_from: None,
            complete_from: 0,
            traced: VecDeque::new(),
            tracing_since: Some(0),
            traced_ns: 0,
            sent_until: 0,
        }
    }

    /// The probe started measuring at `now_ns`: buckets before it are not its to claim.
    /// `tracing`: whether kernel records are on from here (else from `trace_on`).
    pub fn start_at(&mut self, now_ns: u64, tracing: bool) {
        self.complete_from = now_ns / BUCKET_NS;
        self.sent_until = self.complete_from;
        self.tracing_since = tracing.then_some(now_ns);
    }

    /// Kernel records were turned on at `now_ns` (CUPTI's clock, read after the call).
    pub fn trace_on(&mut self, now_ns: u64) {
        self.tracing_since.get_or_insert(now_ns);
    }

    /// Kernel records were turned off at `now_ns` (read before the call).
    pub fn trace_off(&mut self, now_ns: u64) {
        let Some(on) = self.tracing_since.take() else {
            return;
        };
        if now_ns > on {
            self.traced.push_back((on, now_ns));
            self.traced_ns += now_ns - on;
        }
        let keep_from = now_ns.saturating_sub(MAX_BUCKETS as u64 * BUCKET_NS);
        while self.traced.front().is_some_and(|(_, off)| *off < keep_from) {
            self.traced.pop_front();
        }
    }

    /// Nanoseconds traced since the start, the open stretch up to `now_ns` included.
    pub fn traced_total(&self, now_ns: u64) -> u64 {
        self.traced_ns + self.tracing_since.map_or(0, |on| now_ns.saturating_sub(on))
    }

    /// One kernel; `solo_ns` is how long it would have taken alone and `floor_ns` no more
    /// than its estimate (both at most `end - start`).
    pub fn push(&mut self, start: u64, end: u64, solo_ns: u64, floor_ns: u64) {
        self.kernels += 1;
        if end > start {
            let d = end - start;
            self.batch
                .push((start, end, solo_ns.min(d), floor_ns.min(solo_ns).min(d)));
        }
    }

    /// Folds the batch in, sorted by start. A span counts only the time no span folded in
    /// before covers, whichever buffer or thread it came from; one ending more than
    /// [`LATE_HORIZON_NS`] before the newest is skipped (counting it could count time twice).
    /// A span not wholly inside one traced stretch is not believed (`admit`).
    pub fn flush_batch(&mut self) {
        self.batch.sort_unstable();
        let batch = std::mem::take(&mut self.batch);
        for &(start, end, solo, least) in &batch {
            let floor = self.covered_until.saturating_sub(LATE_HORIZON_NS);
            if !self.admit(start, end) || end <= floor {
                continue;
            }
            let span = (end - start) as f64;
            let ratio = (solo as f64 / span, least as f64 / span);
            let start = start.max(floor);
            if start >= self.covered_until {
                // In time order, as one thread's buffer is: nothing can cover it.
                self.busy_ns += end - start;
                self.add_to_timeline(start, end, ratio);
                self.extend_or_insert(start, end);
            } else {
                let mut gaps = std::mem::take(&mut self.gaps);
                self.uncovered(start, end, &mut gaps);
                for &(from, to) in &gaps {
                    self.busy_ns += to - from;
                    self.add_to_timeline(from, to, ratio);
                }
                self.gaps = gaps;
                self.cover(start, end);
            }
            self.covered_until = self.covered_until.max(end);
        }
        self.batch = batch;
        self.batch.clear();
        let floor = self.covered_until.saturating_sub(LATE_HORIZON_NS);
        while let Some((&start, &end)) = self.covered.first_key_value() {
            if end > floor {
                break;
            }
            self.covered.remove(&start);
        }
        self.let_go_of_old_buckets();
    }

    /// The parts of [start, end) no covered stretch holds, in order, into `out`.
    fn uncovered(&self, start: u64, end: u64, out: &mut Vec<(u64, u64)>) {
        out.clear();
        let mut at = start;
        let before = self.covered.range(..start).next_back();
        for (&s, &e) in before.into_iter().chain(self.covered.range(start..end)) {
            if s > at {
                out.push((at, s.min(end)));
            }
            at = at.max(e);
            if at >= end {
                return;
            }
        }
        if at < end {
            out.push((at, end));
        }
    }

    /// [start, end) begins at or after every covered stretch's end: it extends the newest
    /// stretch when it touches it, else starts one.
    fn extend_or_insert(&mut self, start: u64, end: u64) {
        if let Some(mut last) = self.covered.last_entry() {
            if *last.get() >= start {
                *last.get_mut() = end.max(*last.get());
                return;
            }
        }
        self.covered.insert(start, end);
    }

    /// Adds [start, end) to the covered stretches, merging what it touches.
    fn cover(&mut self, start: u64, end: u64) {
        let (mut lo, mut hi) = (start, end);
        if let Some((&s, &e)) = self.covered.range(..=start).next_back() {
            if e >= start {
                lo = s;
                hi = hi.max(e);
            }
        }
        while let Some((&s, &e)) = self.covered.range(lo..=hi).next() {
            hi = hi.max(e);
            self.covered.remove(&s);
        }
        self.covered.insert(lo, hi);
    }

    /// Whether a kernel's span can be believed. Measured on the H100 (docs/validation.md):
    /// when records go off while a CUDA graph's kernels are queued, CUPTI still hands over
    /// their records, stamped as ending tens of milliseconds after the toggle (about when
    /// records came on again), and kernels run while records were off come stamped from
    /// before the next toggle on. Counted, those spans
    /// made four 15 % graph tenants traced half the time cover 0.57 of their traced
    /// milliseconds, each other's milliseconds overlapping, and the split fell back on solo
    /// estimates. So only a span wholly inside one traced stretch counts. One that crosses
    /// a stretch's end ends the stretch at its start, and one that began before a stretch
    /// starts it at its end: what ran there is unknown, and those milliseconds go (again)
    /// as untraced rather than as idle or busy.
    fn admit(&mut self, start: u64, end: u64) -> bool {
        if self.tracing_since.is_some_and(|on| start >= on) {
            return true;
        }
        let i = self.traced.partition_point(|(on, _)| *on <= start);
        if let Some(&(on, off)) = i.checked_sub(1).and_then(|j| self.traced.get(j)) {
            if start < off {
                if end <= off {
                    return true;
                }
                let cut = start.max(on);
                self.traced[i - 1].1 = cut;
                self.traced_ns -= off - cut;
                self.mark_dirty(cut);
                return false;
            }
        }
        for j in i..self.traced.len() {
            let (on, off) = self.traced[j];
            if on >= end {
                return false;
            }
            let cut = end.min(off);
            self.traced[j].0 = cut;
            self.traced_ns -= cut - on;
            self.mark_dirty(on);
        }
        if let Some(on) = self.tracing_since.filter(|on| *on < end) {
            self.tracing_since = Some(end);
            self.mark_dirty(on);
        }
        false
    }

    fn mark_dirty(&mut self, ns: u64) {
        let b = ns / BUCKET_NS;
        self.dirty_from = Some(self.dirty_from.map_or(b, |d| d.min(b)));
    }

    /// `ratios`: the kernel's solo and floor over its span.
    fn add_to_timeline(&mut self, from: u64, end: u64, ratios: (f64, f64)) {
        let last = (end - 1) / BUCKET_NS;
        // A span longer than what is kept only fills what is kept.
        let first = (from / BUCKET_NS).max(last.saturating_sub(MAX_BUCKETS as u64 - 1));
        for b in first..=last {
            let lo = from.max(b * BUCKET_NS);
            let hi = end.min((b + 1) * BUCKET_NS);
            if hi <= lo {
                continue;
            }
            let ns = hi - lo;
            let e = self.timeline.entry(b).or_default();
            e.0 = (e.0 as u64 + ns).min(BUCKET_NS) as u32;
            e.1 = ((e.1 as f64 + ns as f64 * ratios.0) as u64).min(u64::from(e.0)) as u32;
            e.2 = ((e.2 as f64 + ns as f64 * ratios.1) as u64).min(u64::from(e.1)) as u32;
        }
        self.dirty_from = Some(self.dirty_from.map_or(first, |d| d.min(first)));
    }

    fn let_go_of_old_buckets(&mut self) {
        let Some(&newest) = self.timeline.keys().next_back() else {
            return;
        };
        let keep_from = newest.saturating_sub(MAX_BUCKETS as u64 - 1);
        if keep_from > self.complete_from {
            self.complete_from = keep_from;
        }
        self.timeline = self.timeline.split_off(&keep_from);
        if let Some(d) = self.dirty_from.as_mut() {
            *d = (*d).max(keep_from);
        }
    }

    /// The buckets a frame carries, densely up to the millisecond `now_ns` falls in: everything
    /// kept (`full`, the first frame of a connection) or from the oldest change or unsent
    /// bucket. A millisecond not wholly inside a traced stretch is `UNTRACED`; a traced one
    /// without kernels is zero. Clears the change mark.
    pub fn take_buckets(&mut self, full: bool, now_ns: u64) -> (u64, Vec<Bucket>) {
        let end = now_ns / BUCKET_NS;
        let oldest = end.saturating_sub(MAX_BUCKETS as u64);
        let from = if full {
            self.complete_from
        } else {
            self.dirty_from
                .map_or(self.sent_until, |d| d.min(self.sent_until))
        }
        .max(oldest);
        self.dirty_from = None;
        self.sent_until = self.sent_until.max(end);
        if from >= end {
            return (from, Vec::new());
        }
        let mut stretches = self
            .traced
            .iter()
            .copied()
            .chain(self.tracing_since.map(|on| (on, now_ns)))
            .peekable();
        let mut out = Vec::with_capacity((end - from) as usize);
        for b in from..end {
            let (lo, hi) = (b * BUCKET_NS, (b + 1) * BUCKET_NS);
            while stretches.peek().is_some_and(|(_, off)| *off < hi) {
                stretches.next();
            }
            let traced = stretches.peek().is_some_and(|(on, _)| *on <= lo);
            out.push(match (traced, self.timeline.get(&b)) {
                (false, _) => Bucket {
                    covered_us: UNTRACED,
                    ..Bucket::default()
                },
                (true, Some(&(covered, solo, floor))) => Bucket {
                    covered_us: (covered / 1000) as u16,
                    solo_us: (solo / 1000) as u16,
                    floor_us: (floor / 1000) as u16,
                },
                (true, None) => Bucket::default(),
            });
        }
        (from, out)
    }
}

#[cfg(test)]
#[path = "spans_tests.rs"]
mod tests;

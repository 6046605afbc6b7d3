use super::*;

#[test]
fn overlapping_and_nested_spans_count_once() {
    let mut s = Spans::new();
    s.push(100, 200, 100, 100);
    s.push(150, 250, 100, 100); // overlaps
    s.push(160, 170, 10, 10); // nested
    s.push(300, 400, 100, 100);
    s.push(500, 500, 0, 0); // empty: counted as a kernel, no time
    s.flush_batch();
    assert_eq!(s.busy_ns, 250);
    assert_eq!(s.kernels, 5);
    // A later batch that starts inside what was covered.
    s.push(350, 450, 100, 100);
    s.flush_batch();
    assert_eq!(s.busy_ns, 300);
}

#[test]
fn a_late_buffer_of_another_thread_counts_what_nobody_covered() {
    // Forward kernels from the main thread arrive first; the backward pass's, launched
    // from another thread in between them, arrive in a later buffer.
    let mut s = Spans::new();
    s.start_at(0, true);
    for k in 0..10u64 {
        s.push(k * 10 * MS, k * 10 * MS + MS, MS, MS);
    }
    s.flush_batch();
    assert_eq!(s.busy_ns, 10 * MS);
    for k in 0..10u64 {
        // 2 ms each, the first half of a millisecond overlapping a forward kernel.
        let from = k * 10 * MS + MS / 2;
        s.push(from, from + 2 * MS, 2 * MS, 2 * MS);
    }
    s.flush_batch();
    assert_eq!(s.busy_ns, 10 * MS + 10 * (3 * MS / 2));
    let (_, buckets) = s.take_buckets(true, 100 * MS);
    let covered: u64 = buckets.iter().map(|b| u64::from(b.covered_us)).sum();
    assert_eq!(
        covered * 1_000,
        s.busy_ns,
        "the timeline holds what the total holds"
    );
    // Late past the horizon: skipped, never counted twice.
    s.push(
        200 * MS + LATE_HORIZON_NS,
        201 * MS + LATE_HORIZON_NS,
        MS,
        MS,
    );
    s.flush_batch();
    let before = s.busy_ns;
    s.push(MS / 4, MS / 2, MS / 4, MS / 4);
    s.flush_batch();
    assert_eq!(s.busy_ns, before);
    assert!(s.covered.len() <= 2, "{:?}", s.covered);
}

const MS: u64 = BUCKET_NS;

#[test]
fn the_timeline_splits_spans_into_milliseconds_with_their_solo_share() {
    let mut s = Spans::new();
    s.start_at(10 * MS, true);
    // 2.5 ms span whose kernel alone takes 1.25 ms: half of every covered µs is solo; its
    // floor (at most the estimate) 1 ms, two fifths.
    s.push(10 * MS + MS / 2, 13 * MS, 1_250_000, 1_000_000);
    s.flush_batch();
    let (first, buckets) = s.take_buckets(true, 13 * MS + 10);
    assert_eq!(first, 10);
    let covered: Vec<u16> = buckets.iter().map(|b| b.covered_us).collect();
    let solo: Vec<u16> = buckets.iter().map(|b| b.solo_us).collect();
    let floor: Vec<u16> = buckets.iter().map(|b| b.floor_us).collect();
    assert_eq!(covered, [500, 1000, 1000]);
    assert_eq!(solo, [250, 500, 500]);
    assert_eq!(floor, [200, 400, 400]);
    assert_eq!(s.complete_from, 10);
    // Nothing changed and no time passed: an incremental frame carries nothing.
    assert!(s.take_buckets(false, 13 * MS + 20).1.is_empty());
    // A kernel in bucket 20 arrives by 21 ms: the frame carries 13..21, traced, idle but 20.
    s.push(20 * MS, 20 * MS + 100_000, 100_000, 100_000);
    s.flush_batch();
    let (first, buckets) = s.take_buckets(false, 21 * MS);
    assert_eq!((first, buckets.len()), (13, 8));
    assert_eq!(buckets[7].covered_us, 100);
    assert!(buckets[..7].iter().all(|b| *b == Bucket::default()));
    // A record for a bucket already sent (traced idle) is sent again with its time.
    s.push(21 * MS, 21 * MS + 300_000, 300_000, 300_000);
    s.flush_batch();
    let (first, buckets) = s.take_buckets(false, 23 * MS);
    let covered: Vec<u16> = buckets.iter().map(|b| b.covered_us).collect();
    assert_eq!((first, covered), (21, vec![300, 0]));
}

#[test]
fn milliseconds_outside_traced_stretches_are_sent_as_untraced() {
    let mut s = Spans::new();
    s.start_at(0, true);
    s.trace_off(2 * MS + MS / 2); // traced 0..2.5 ms
    s.trace_on(5 * MS + 1); // 5 ms is not wholly traced
    s.push(MS, 2 * MS, MS, MS);
    s.push(6 * MS, 7 * MS + MS / 2, MS, MS);
    s.flush_batch();
    s.trace_off(8 * MS);
    s.trace_on(9 * MS);
    let (first, buckets) = s.take_buckets(true, 10 * MS + 3);
    assert_eq!(first, 0);
    let covered: Vec<u16> = buckets.iter().map(|b| b.covered_us).collect();
    let u = UNTRACED;
    assert_eq!(covered, [0, 1000, u, u, u, u, 1000, 500, u, 1000 - 1000]);
    // 2.5 ms + 3 ms closed, and the open stretch from 9 ms.
    assert_eq!(s.traced_total(10 * MS), 2 * MS + MS / 2 + 3 * MS - 1 + MS);
    // Turning on twice keeps the first start; off twice closes once.
    s.trace_on(9 * MS + 5);
    s.trace_off(11 * MS);
    s.trace_off(12 * MS);
    assert_eq!(s.traced.back(), Some(&(9 * MS, 11 * MS)));
}

#[test]
fn spans_that_cross_a_toggle_of_records_are_not_believed() {
    // The shape measured on the H100 (a CUDA graph's kernels, records on and off in
    // 20 ms slots): kernels of a replay queued when records went off at 20 ms came
    // stamped from just before the toggle to well after it (19.8 ms → 34.8 ms here); a
    // kernel run while they were off, 30 ms → 41 ms, after they came on again at 40 ms.
    let mut s = Spans::new();
    s.start_at(0, true);
    for k in 0..990 {
        s.push(k * 20_000, k * 20_000 + 10_000, 10_000, 10_000); // 10 µs every 20 µs
    }
    s.flush_batch();
    s.trace_off(20 * MS);
    s.trace_on(40 * MS);
    s.push(19 * MS + 800_000, 34 * MS + 800_000, 10_000, 10_000);
    s.push(30 * MS, 41 * MS, 10_000, 10_000);
    s.push(45 * MS, 45 * MS + 10_000, 10_000, 10_000);
    s.flush_batch();
    // Only the kernels that ran inside a traced stretch count.
    assert_eq!(s.busy_ns, 990 * 10_000 + 10_000);
    let (first, buckets) = s.take_buckets(true, 50 * MS);
    assert_eq!(first, 0);
    let covered: Vec<u16> = buckets.iter().map(|b| b.covered_us).collect();
    // 0..19 ms traced with their kernels; 19 ms (cut at 19.8) to 41 ms unknown; then traced.
    assert!(covered[..19].iter().all(|c| *c == 500), "{covered:?}");
    assert!(
        covered[19..41].iter().all(|c| *c == UNTRACED),
        "{covered:?}"
    );
    assert_eq!(covered[41..], [0, 0, 0, 0, 10, 0, 0, 0, 0]);
    assert_eq!(s.traced_total(50 * MS), 19 * MS + 800_000 + 9 * MS);
}

#[test]
fn a_cut_resends_milliseconds_already_sent_as_traced() {
    let mut s = Spans::new();
    s.start_at(0, true);
    s.push(MS, MS + 10_000, 10_000, 10_000);
    s.flush_batch();
    s.trace_off(5 * MS);
    let (_, first) = s.take_buckets(true, 6 * MS);
    assert_eq!(first[3].covered_us, 0);
    // A late record of a kernel queued when records went off: 3.5 ms to 9 ms.
    s.push(3 * MS + MS / 2, 9 * MS, 10_000, 10_000);
    s.flush_batch();
    let (from, again) = s.take_buckets(false, 7 * MS);
    assert_eq!(from, 3);
    assert!(again.iter().all(|b| b.covered_us == UNTRACED), "{again:?}");
}

#[test]
fn a_bucket_never_holds_more_than_a_millisecond_and_old_ones_are_let_go() {
    let mut s = Spans::new();
    s.push(0, MS, MS, MS);
    s.flush_batch();
    s.push(0, MS, MS, MS); // late duplicate: skipped by the union
    s.flush_batch();
    assert_eq!(s.timeline[&0], (1_000_000, 1_000_000, 1_000_000));
    // 20 s later: the first bucket falls out of what is kept.
    s.push(20_000 * MS, 20_000 * MS + 10, 10, 10);
    s.flush_batch();
    assert!(!s.timeline.contains_key(&0));
    assert_eq!(s.complete_from, 20_000 - MAX_BUCKETS as u64 + 1);
    let (first, buckets) = s.take_buckets(true, 20_001 * MS);
    assert_eq!(first, 20_001 - MAX_BUCKETS as u64);
    assert_eq!(buckets.len(), MAX_BUCKETS);
    assert_eq!(buckets[MAX_BUCKETS - 1].covered_us, 0);
    // A span longer than all that is kept touches only the kept buckets.
    s.push(20_001 * MS, 60_000 * MS, 1, 1);
    s.flush_batch();
    assert!(s.timeline.len() <= MAX_BUCKETS);
}

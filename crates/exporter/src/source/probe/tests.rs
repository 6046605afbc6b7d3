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
                floor_us: c / 2,
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
    assert!(t
        .covered
        .iter()
        .zip(&t.traced)
        .all(|(c, tr)| if *tr { *c == 1.0 } else { *c == 0.0 }));
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

#[test]
fn a_reading_says_whether_its_probe_sends_totals_only() {
    let book = ProbeBook::new(Duration::from_secs(5));
    let t0 = Instant::now();
    for s in 0..=6u64 {
        let at = t0 + Duration::from_secs(s);
        book.record(1, &frame(400 * s, 10 * s), at);
        let mut f = timeline_frame(1_000 * (s + 1), 1_000 * s, &[400; 1000], FLAG_FULL);
        f.busy_ns = 400 * s * MS;
        f.kernels = 10 * s;
        book.record(2, &f, at);
    }
    let r = book.readings(&[1, 2], t0 + Duration::from_secs(6));
    assert!(r[&1].totals_only, "{:?}", r[&1]);
    assert!(!r[&2].totals_only, "{:?}", r[&2]);
}

#[test]
fn every_timeline_ends_at_the_same_millisecond_whatever_each_report_took_to_arrive() {
    let book = ProbeBook::new(Duration::from_secs(2));
    let t0 = Instant::now();
    // Both probes read the shared clock at 10 s and covered bucket 7_500 alone; the second
    // one's report reached tessera 3 ms later, so by it alone the clock would read 3 ms behind.
    let marked = |mark: u64| {
        let covered: Vec<u16> = (5_000..10_000)
            .map(|b| if b == mark { 1000 } else { 0 })
            .collect();
        timeline_frame(10_000, 5_000, &covered, FLAG_FULL)
    };
    book.record(1, &marked(7_500), t0);
    book.record(2, &marked(7_500), t0 + Duration::from_millis(3));
    let now = t0 + Duration::from_millis(10);
    let lines = book.timelines(&[1, 2], now);
    let at = |pid: u32| lines[&pid].covered.iter().position(|&c| c == 1.0);
    assert!(at(1).is_some());
    assert_eq!(at(1), at(2), "one window for every process");
}

/// A probe whose records a profiler took says so: its reading carries no ratio and says why,
/// where a probe merely off has none. Once its records are back, the reports from before are
/// gone: no ratio until a clean window of them.
#[test]
fn a_profiler_holding_cupti_gives_a_reading_that_says_so_until_records_are_back() {
    let book = ProbeBook::new(Duration::from_secs(5));
    let t0 = Instant::now();
    let at = |s: u64| t0 + Duration::from_secs(s);
    for s in 0..=6u64 {
        book.record(7, &frame(400 * s, 10 * s), at(s));
    }
    assert!(book.readings(&[7], at(6))[&7].busy_ratio.is_some());
    for s in 7..=9u64 {
        let mut f = frame(2_400, 60);
        f.flags = FLAG_DISABLED | FLAG_PROFILER;
        book.record(7, &f, at(s));
    }
    let r = book.readings(&[7], at(9))[&7];
    assert!(r.profiler, "{r:?}");
    assert_eq!(r.busy_ratio, None);
    assert_eq!(r.window_kernels, None);
    assert!(!r.silent);
    // Turned off for another reason: no reading at all, as before.
    let mut f = frame(2_400, 60);
    f.flags = FLAG_DISABLED;
    book.record(8, &f, at(9));
    assert!(!book.readings(&[8], at(9)).contains_key(&8));
    // Back: the next report counts from itself.
    book.record(7, &frame(2_800, 70), at(10));
    let r = book.readings(&[7], at(10))[&7];
    assert!(!r.profiler);
    assert_eq!(r.busy_ratio, None);
}

#[test]
fn a_sender_nvml_never_lists_has_every_report_refused_once_its_grace_is_over() {
    let book = ProbeBook::new(Duration::from_secs(5));
    let grace = UNLISTED_GRACE;
    let t0 = Instant::now();
    let refused = |b: &ProbeBook| b.refused()["no-gpu-process"];
    for s in 0..5u64 {
        let at = t0 + Duration::from_secs(s);
        book.record(7, &frame(10 * s, s), at);
        book.record(8, &frame(10 * s, s), at);
        // pid 8 becomes a GPU process at its third report, as a CUDA process's context makes
        // NVML list it a moment after its probe's first report.
        let listed: &[u32] = if s >= 2 { &[8] } else { &[] };
        book.settle_unlisted(listed, at, grace);
    }
    assert_eq!(refused(&book), 0, "within the grace nothing is refused");
    let after = t0 + grace;
    book.settle_unlisted(&[8], after, grace);
    assert_eq!(refused(&book), 5, "pid 7's five reports, none of pid 8's");
    book.record(7, &frame(60, 6), after);
    book.record(8, &frame(60, 6), after);
    book.settle_unlisted(&[8], after + Duration::from_secs(1), grace);
    assert_eq!(refused(&book), 6, "and each one after, once");
    book.settle_unlisted(&[8], after + Duration::from_secs(2), grace);
    assert_eq!(refused(&book), 6, "a report is counted once");
    assert!(book.readings(&[8], after).contains_key(&8));
}

#[test]
fn a_sender_nvml_stops_listing_is_refused_from_then_on() {
    let book = ProbeBook::new(Duration::from_secs(5));
    let t0 = Instant::now();
    book.record(9, &frame(0, 0), t0);
    book.settle_unlisted(&[9], t0, UNLISTED_GRACE);
    let later = t0 + UNLISTED_GRACE * 2;
    book.record(9, &frame(10, 1), later);
    book.record(9, &frame(20, 2), later);
    book.settle_unlisted(&[], later, UNLISTED_GRACE);
    assert_eq!(book.refused()["no-gpu-process"], 2);
}

#[test]
fn a_sender_past_capacity_is_refused_and_counted() {
    let book = ProbeBook::new(Duration::from_secs(5));
    let t0 = Instant::now();
    for pid in 0..MAX_CONNECTIONS as u32 {
        book.record(pid, &frame(0, 0), t0);
    }
    assert_eq!(book.refused()["over-capacity"], 0);
    book.record(MAX_CONNECTIONS as u32, &frame(0, 0), t0);
    book.record(0, &frame(1, 1), t0);
    assert_eq!(
        book.refused()["over-capacity"],
        1,
        "a known sender still reports"
    );
}

#[test]
fn a_probe_without_cupti_gives_a_reading_that_says_so_and_nothing_else() {
    let book = ProbeBook::new(Duration::from_secs(5));
    let t0 = Instant::now();
    let f = Frame {
        flags: FLAG_DISABLED | FLAG_NO_CUPTI,
        ..frame(0, 0)
    };
    book.record(4, &f, t0);
    book.record(
        5,
        &Frame {
            flags: FLAG_DISABLED,
            ..frame(0, 0)
        },
        t0,
    );
    let r = book.readings(&[4, 5], t0);
    assert!(!r.contains_key(&5), "a probe merely off reads as none");
    assert!(r[&4].no_cupti && !r[&4].profiler, "{:?}", r[&4]);
    assert_eq!(r[&4].busy_ratio, None);
}

use super::*;

#[test]
fn rates_follow_the_looping_phases() {
    let s: ScenarioProcesses = serde_yaml::from_str(
        "repeat_after_ms: 100\nphases:\n  - at_ms: 0\n    processes: [{ pid: 1, sm_util: 25 }]\n  - at_ms: 50\n    processes: [{ pid: 1, sm_util: 70 }, { pid: 2, sm_util: 10 }]\n",
    )
    .unwrap();
    assert_eq!(rates_at(&s, &[1, 2], 10), [0.25, 0.0]);
    assert_eq!(rates_at(&s, &[1, 2], 60), [0.7, 0.1]);
    assert_eq!(rates_at(&s, &[1, 2], 130), [0.25, 0.0], "looped");
}

#[test]
fn the_sampled_client_reads_its_rate_over_its_traced_eighth() {
    let scenario = "phases:\n  - at_ms: 0\n    processes: [{ pid: 45061, sm_util: 20 }, { pid: 45063, sm_util: 40 }]\n";
    let book = ProbeBook::new(Duration::from_secs(2));
    let feed = start(scenario, &[45061, SAMPLED_PID], book.clone()).unwrap();
    std::thread::sleep(Duration::from_millis(2_300));
    // A 2 s window: its ratios need reports spanning a second.
    let r = book.readings(&[45061, SAMPLED_PID], Instant::now());
    drop(feed);
    let (full, sampled) = (r[&45061], r[&SAMPLED_PID]);
    assert_eq!(full.traced_share, None);
    assert!((full.busy_ratio.unwrap() - 0.2).abs() < 0.03, "{full:?}");
    assert!(
        (sampled.busy_ratio.unwrap() - 0.4).abs() < 0.03,
        "{sampled:?}"
    );
    assert!(
        (sampled.traced_share.unwrap() - SAMPLED_TRACED_SHARE).abs() < 0.02,
        "{sampled:?}"
    );
}

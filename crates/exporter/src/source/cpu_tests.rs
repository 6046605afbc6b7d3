use super::*;

fn write_stat(root: &Path, pid: u32, used: u64, start: u64) {
    let d = root.join(pid.to_string());
    std::fs::create_dir_all(&d).unwrap();
    let line = format!("{pid} (python3) S 1 1 1 0 -1 0 0 0 0 0 {used} 0 0 0 20 0 4 0 {start} 0\n");
    std::fs::write(d.join("stat"), line).unwrap();
}

#[test]
fn cores_over_the_window_unknown_until_it_is_spanned() {
    let dir = tempfile::tempdir().unwrap();
    let mut t = CpuTracker::new(Duration::from_secs(5));
    let hz = t.ticks_per_second;
    let t0 = Instant::now();
    for s in 0..=5u64 {
        // Half a core for pid 1, nothing for pid 2.
        write_stat(dir.path(), 1, (hz as u64 / 2) * s, 77);
        write_stat(dir.path(), 2, 3, 78);
        let got = t.refresh(dir.path(), &[1, 2, 3], t0 + Duration::from_secs(s));
        if s < 4 {
            assert!(got.is_empty(), "second {s}: {got:?}");
        } else {
            assert!((got[&1] - 0.5).abs() < 0.01, "{got:?}");
            assert_eq!(got[&2], 0.0);
            assert!(!got.contains_key(&3), "no stat file, no figure");
        }
    }
    // PID 1 reused by a new process: unknown again.
    write_stat(dir.path(), 1, 0, 999);
    let got = t.refresh(dir.path(), &[1], t0 + Duration::from_secs(6));
    assert!(!got.contains_key(&1));
}

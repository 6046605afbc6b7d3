use super::*;

#[test]
fn reads_comm_and_tolerates_junk() {
    let dir = tempfile::tempdir().unwrap();
    let write = |pid: u32, bytes: &[u8]| {
        let p = dir.path().join(pid.to_string());
        std::fs::create_dir_all(&p).unwrap();
        std::fs::write(p.join("comm"), bytes).unwrap();
    };
    write(1, b"python3\n");
    write(2, b"bad\xff\xfename\n");
    write(3, &[b'x'; 10_000]);
    assert_eq!(process_name(dir.path(), 1).as_deref(), Some("python3"));
    assert_eq!(
        process_name(dir.path(), 2).as_deref(),
        Some("bad\u{fffd}\u{fffd}name")
    );
    assert_eq!(
        process_name(dir.path(), 3).map(|s| s.len()),
        Some(MAX_COMM_BYTES)
    );
    assert_eq!(process_name(dir.path(), 4), None);
}

#[test]
fn reads_cpu_ticks_past_a_hostile_comm() {
    let line =
        b"4242 (py) thon (x)) S 1 4242 4242 0 -1 4194560 100 0 0 0 250 50 0 0 20 0 12 0 98765 0";
    assert_eq!(
        parse_stat(line),
        Some(CpuTicks {
            used: 300,
            start: 98765
        })
    );
    assert_eq!(parse_stat(b"4242 (py) S 1 2"), None);
    assert_eq!(parse_stat(b"no parenthesis at all"), None);
    assert_eq!(
        parse_stat(b"1 (a) S 1 1 1 0 -1 0 0 0 0 0 x 5 0 0 20 0 1 0 7 0"),
        None
    );
    let huge = [b'9'; 100_000];
    assert_eq!(parse_stat(&huge), None);
    assert!(clock_ticks_per_second() > 0.0);
}

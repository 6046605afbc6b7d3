//! The probe in a real process, against a stand-in CUPTI (`crates/fake-cupti`): it reports,
//! it turns itself off when CUPTI fails, it stays out of a process on a node without tessera,
//! and it leaves CUPTI alone at exit — whose teardown here aborts the process if called into
//! meanwhile, as a CUPTI call at exit crashed processes on the H100. The child process is the
//! crate's `probe_host` example, which cargo builds for its tests.

use std::io::Read;
use std::os::unix::net::UnixListener;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::Duration;

use std::io::Write;
use tessera_probe::wire::{
    Bucket, Control, Frame, FLAG_ALONE, FLAG_DISABLED, FLAG_FULL, FLAG_NO_CUPTI, FLAG_PROFILER,
    UNTRACED,
};

/// The directory cargo puts this test binary in (`target/<profile>/deps`).
fn deps_dir() -> PathBuf {
    let exe = std::env::current_exe().expect("test binary path");
    exe.parent().expect("deps directory").to_path_buf()
}

/// cargo builds the dev-dependency's cdylib into `deps/`, beside this binary.
fn fake_cupti() -> PathBuf {
    let lib = deps_dir().join("libfake_cupti.so");
    assert!(lib.exists(), "{} was not built", lib.display());
    lib
}

/// cargo builds the crate's examples into `examples/`, beside `deps/`.
fn probe_host() -> PathBuf {
    let exe = deps_dir()
        .parent()
        .expect("profile directory")
        .join("examples/probe_host");
    assert!(
        exe.exists(),
        "{} was not built (plain `cargo test` builds examples; with `--test`, add `--examples`)",
        exe.display()
    );
    exe
}

/// Reads whole frames from the first connection until it closes.
fn collect_frames(listener: UnixListener) -> std::thread::JoinHandle<Vec<Frame>> {
    collect_frames_sending(listener, Vec::new())
}

/// As `collect_frames`, and writes each `(ms after the connection, bytes)` to the probe, as
/// tessera writes its control messages.
fn collect_frames_sending(
    listener: UnixListener,
    send: Vec<(u64, Vec<u8>)>,
) -> std::thread::JoinHandle<Vec<Frame>> {
    std::thread::spawn(move || {
        let mut frames = Vec::new();
        let _ = listener.set_nonblocking(false);
        if let Ok((mut conn, _)) = listener.accept() {
            if let Ok(mut w) = conn.try_clone() {
                std::thread::spawn(move || {
                    let t0 = std::time::Instant::now();
                    for (ms, bytes) in send {
                        let at = t0 + Duration::from_millis(ms);
                        std::thread::sleep(at.saturating_duration_since(std::time::Instant::now()));
                        if w.write_all(&bytes).is_err() {
                            return;
                        }
                    }
                });
            }
            let _ = conn.set_read_timeout(Some(Duration::from_secs(10)));
            let mut bytes = Vec::new();
            let _ = conn.read_to_end(&mut bytes);
            let mut at = 0;
            while let Some(head) = bytes
                .get(at..at + 8)
                .and_then(|s| Frame::rest_of_header(s.try_into().ok()?))
            {
                let Some(h) = bytes.get(at..at + 8 + head).and_then(Frame::decode_header) else {
                    break;
                };
                let end = at + 8 + head + h.bucket_bytes;
                let Some(body) = bytes.get(at + 8 + head..end) else {
                    break;
                };
                frames.push(h.frame.with_buckets(body, h.bucket_len));
                at = end;
            }
        }
        frames
    })
}

struct Dir(PathBuf);

impl Dir {
    fn new(name: &str) -> Dir {
        let d = std::env::temp_dir().join(format!("tessera-probe-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).expect("temp dir");
        Dir(d)
    }
}

impl Drop for Dir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Runs `probe_host` with the probe pointed at `socket` and the fake CUPTI, plus `env`.
fn run_child(socket: &Path, env: &[(&str, &str)]) -> Output {
    let mut cmd = Command::new(probe_host());
    cmd.env("TESSERA_PROBE_SOCKET", socket)
        .env("TESSERA_PROBE_CUPTI", fake_cupti());
    for (k, v) in env {
        cmd.env(k, v);
    }
    let out = cmd.output().expect("child process");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{:?}\n{stderr}", out.status);
    out
}

/// Runs `probe_host` with `env` against a tessera socket of its own; the frames it sent.
fn frames_of_run(name: &str, env: &[(&str, &str)]) -> Vec<Frame> {
    frames_of_run_sending(name, env, Vec::new()).0
}

/// As `frames_of_run`, with `send` written to the probe (see `collect_frames_sending`); also
/// the fake CUPTI's log of records turned on and off.
fn frames_of_run_sending(
    name: &str,
    env: &[(&str, &str)],
    send: Vec<(u64, Vec<u8>)>,
) -> (Vec<Frame>, String) {
    let dir = Dir::new(name);
    let socket = dir.0.join("probe.sock");
    let log = dir.0.join("enable.log");
    let frames = collect_frames_sending(UnixListener::bind(&socket).expect("bind"), send);
    let mut env = env.to_vec();
    env.push((
        "FAKE_CUPTI_ENABLE_LOG",
        log.to_str().expect("utf-8 temp path"),
    ));
    run_child(&socket, &env);
    let frames = frames.join().expect("reader");
    (frames, std::fs::read_to_string(&log).unwrap_or_default())
}

fn shared(on: bool) -> Vec<u8> {
    Control { shared: on }.encode().to_vec()
}

/// Every frame says the probe is off and claims no timeline: tessera must not read its
/// silence as idle.
fn assert_reported_off(frames: &[Frame]) {
    assert!(!frames.is_empty());
    assert!(
        frames
            .iter()
            .all(|f| f.flags & FLAG_DISABLED != 0 && f.buckets.is_empty() && f.now_ns == 0),
        "{frames:?}"
    );
}

#[test]
fn a_process_exiting_while_traced_in_duty_cycles_exits_cleanly() {
    let frames = frames_of_run(
        "exit",
        &[
            // 5 ms slots: a probe that still called CUPTI at exit would do so within the
            // teardown's 200 ms.
            ("TESSERA_PROBE_SLOT_MS", "5"),
            ("FAKE_CUPTI_KERNELS_PER_FLUSH", "40000"),
            ("TESSERA_PROBE_OVERHEAD", "0.005"),
            ("FAKE_CUPTI_TEARDOWN_MS", "200"),
            ("TESSERA_PROBE_RECORDS", "always"),
        ],
    );
    let last = frames.last().expect("the probe reported");
    // The fake's ~25k launches a second (as many as a 4 MiB buffer holds) would cost 1.75 % in
    // records traced in full, past the 0.5 % budget: the probe was throttled when it exited.
    assert!(last.kernels > 0, "{last:?}");
    assert!(last.traced_ns.is_some_and(|t| t > 0), "{last:?}");
    assert!(
        last.buckets.iter().any(|b| b.covered_us == UNTRACED),
        "{last:?}"
    );
    assert_eq!(last.flags & FLAG_DISABLED, 0);
}

#[test]
fn a_probe_whose_cupti_fails_turns_itself_off_and_says_so() {
    let (frames, _) = frames_of_run_sending(
        "fail",
        &[("FAKE_CUPTI_FAIL_ENABLE", "1")],
        vec![(0, shared(true))],
    );
    assert_reported_off(&frames);
    // Failed, not merely alone.
    assert!(
        frames.last().is_some_and(|f| f.flags & FLAG_ALONE == 0),
        "{frames:?}"
    );
}

/// A process alone on its device never pays for kernel records: the probe attaches, reports
/// itself off (alone), and never turns records on, however long it runs.
#[test]
fn a_probe_alone_never_turns_records_on() {
    let (frames, log) = frames_of_run_sending("alone", &[("PROBE_HOST_MS", "3200")], Vec::new());
    assert!(frames.len() >= 2, "{frames:?}");
    assert!(
        frames.iter().all(
            |f| f.flags & (FLAG_DISABLED | FLAG_ALONE) == FLAG_DISABLED | FLAG_ALONE
                && f.kernels == 0
                && f.buckets.is_empty()
        ),
        "{frames:?}"
    );
    assert!(!log.contains("enable"), "records went on: {log}");
}

/// tessera's "shared" message turns records on: from the next report the probe measures,
/// its first frame with records on is full (tessera dropped its timeline while off), and
/// "alone" again turns them off.
#[test]
fn the_shared_message_turns_records_on_and_alone_turns_them_off() {
    let (frames, log) = frames_of_run_sending(
        "shared",
        &[("PROBE_HOST_MS", "5200")],
        vec![(300, shared(true)), (2_600, shared(false))],
    );
    assert_eq!(
        record_calls(&log).into_iter().find(|l| *l != "register"),
        Some("enable"),
        "{log}"
    );
    assert!(log.contains("disable"), "{log}");
    let on: Vec<&Frame> = frames
        .iter()
        .filter(|f| f.flags & FLAG_DISABLED == 0)
        .collect();
    assert!(!on.is_empty(), "{frames:?}");
    assert!(on[0].flags & FLAG_FULL != 0, "{:?}", on[0]);
    assert!(on.iter().any(|f| f.kernels > 0), "{frames:?}");
    // Off before it, alone after it.
    assert!(frames[0].flags & FLAG_ALONE != 0, "{:?}", frames[0]);
    let last = frames.last().expect("frames");
    assert!(last.flags & FLAG_ALONE != 0, "{last:?}");
}

/// Whatever else comes down the socket is ignored: garbage, a message of another version or
/// with unknown flags, a flood bigger than any read, tessera's own frames echoed back. None
/// turns records on, and the process runs and exits as usual; a real message after all that
/// still works.
#[test]
fn hostile_bytes_from_the_socket_are_ignored() {
    let mut wrong_version = shared(true);
    wrong_version[4] = 2;
    let mut unknown_flags = shared(true);
    unknown_flags[8] = 0xff;
    let mut reserved = shared(true);
    reserved[12] = 1;
    let mut flood = vec![0xa5u8; 1 << 20];
    flood.extend_from_slice(&Frame::default().encode());
    let (frames, log) = frames_of_run_sending(
        "hostile",
        &[("PROBE_HOST_MS", "3200")],
        vec![
            (100, wrong_version),
            (150, unknown_flags),
            (200, reserved),
            (250, b"TSC1".repeat(64)),
            (300, flood),
        ],
    );
    assert!(!log.contains("enable"), "records went on: {log}");
    assert!(
        frames.iter().all(|f| f.flags & FLAG_DISABLED != 0),
        "{frames:?}"
    );
    // Repeated "shared" after junk: one switch on, then steady (tracing always, so that no
    // duty cycle toggles records).
    let (_, log) = frames_of_run_sending(
        "repeated",
        &[("PROBE_HOST_MS", "3200"), ("TESSERA_PROBE_OVERHEAD", "1")],
        vec![
            (100, vec![0xff; 37]),
            (200, shared(true).repeat(50)),
            (900, shared(true)),
        ],
    );
    assert_eq!(log.matches("enable").count(), 1, "{log}");
}

/// `TESSERA_PROBE_RECORDS=never` (CUPTI attached, no kernel records: a measuring knob) must
/// not pass for an idle process: with nothing recorded, the probe reports itself off.
#[test]
fn a_probe_attached_without_records_claims_no_timeline() {
    assert_reported_off(&frames_of_run(
        "never",
        &[("TESSERA_PROBE_RECORDS", "never")],
    ));
}

/// A tenant image without CUPTI: the probe loads, CUPTI cannot, and the probe says so once a
/// second (off, no timeline), so that tessera can give that reason for the missing figure.
#[test]
fn a_probe_that_finds_no_cupti_says_so() {
    let frames = frames_of_run(
        "no-cupti",
        &[("TESSERA_PROBE_CUPTI", "/nonexistent/libcupti.so")],
    );
    assert!(frames.len() >= 2, "{frames:?}");
    assert_reported_off(&frames);
    assert!(
        frames
            .iter()
            .all(|f| f.flags & FLAG_NO_CUPTI != 0 && f.kernels == 0),
        "{frames:?}"
    );
    // With CUPTI the same run never says so.
    let frames = frames_of_run("with-cupti", &[]);
    assert!(
        frames.iter().all(|f| f.flags & FLAG_NO_CUPTI == 0),
        "{frames:?}"
    );
}

#[test]
fn without_tessera_on_the_node_cupti_is_never_loaded() {
    let dir = Dir::new("absent");
    let marker = dir.0.join("loaded");
    run_child(
        &dir.0.join("no-such.sock"),
        &[(
            "FAKE_CUPTI_LOADED",
            marker.to_str().expect("utf-8 temp path"),
        )],
    );
    assert!(
        !marker.exists(),
        "the probe loaded CUPTI with no tessera to report to"
    );
    // The marker works: with a socket present the same run loads it.
    let socket = dir.0.join("probe.sock");
    let frames = collect_frames(UnixListener::bind(&socket).expect("bind"));
    run_child(
        &socket,
        &[(
            "FAKE_CUPTI_LOADED",
            marker.to_str().expect("utf-8 temp path"),
        )],
    );
    assert!(marker.exists());
    drop(frames);
}

/// The knobs behind docs/validation.md's within-process overhead figures: CUPTI attached only
/// after `TESSERA_PROBE_START_MS`, and every toggle of kernel records noted on CUPTI's clock,
/// which `overhead_within.py` files each block of launches by.
#[test]
fn a_late_attach_is_noted_with_every_toggle_after_it() {
    let dir = Dir::new("log");
    let socket = dir.0.join("probe.sock");
    let log = dir.0.join("toggles.txt");
    let frames = collect_frames(UnixListener::bind(&socket).expect("bind"));
    let started = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .expect("clock")
        .as_nanos() as u64;
    run_child(
        &socket,
        &[
            ("TESSERA_PROBE_START_MS", "400"),
            (
                "TESSERA_PROBE_TRACE_LOG",
                log.to_str().expect("utf-8 temp path"),
            ),
            ("TESSERA_PROBE_SLOT_MS", "5"),
            ("FAKE_CUPTI_KERNELS_PER_FLUSH", "40000"),
            ("TESSERA_PROBE_OVERHEAD", "0.005"),
            ("TESSERA_PROBE_RECORDS", "always"),
        ],
    );
    drop(frames);
    let text = std::fs::read_to_string(&log).expect("the probe wrote its log");
    let lines: Vec<(&str, u64)> = text
        .lines()
        .map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            assert_eq!(f.len(), 3, "{l}");
            (f[0], f[1].parse().expect("ns"))
        })
        .collect();
    assert_eq!(lines.first().map(|l| l.0), Some("attach"), "{text}");
    assert!(
        lines[0].1 >= started + 400_000_000,
        "attached too early: {text}"
    );
    // Throttled after its first judgement: records went off and on again, in clock order.
    assert!(lines.iter().any(|l| l.0 == "off"), "{text}");
    assert!(lines.iter().any(|l| l.0 == "on"), "{text}");
    assert!(lines.windows(2).all(|w| w[0].1 <= w[1].1), "{text}");
}

/// The lines of the fake CUPTI's log that say what the probe did to CUPTI's records, and when
/// the played profiler started and ended.
fn record_calls(log: &str) -> Vec<&str> {
    log.lines()
        .filter(|l| {
            matches!(
                *l,
                "enable" | "disable" | "register" | "profiler-start" | "profiler-end"
            )
        })
        .collect()
}

/// A profiler in the process (the PyTorch profiler for two seconds mid-run) takes CUPTI's
/// records: the probe says so in every frame while it holds them (off, never alone, never a
/// count that just stopped), touches no activity setting of the profiler's meanwhile, and when
/// the profiler lets CUPTI go registers again: records go back on, the first frame with them
/// is full, and the milliseconds it could not see are sent as untraced, not as idle.
#[test]
fn a_profiler_takes_the_records_and_the_probe_says_so_until_they_come_back() {
    let (frames, log) = frames_of_run_sending(
        "profiler",
        &[
            ("PROBE_HOST_MS", "8000"),
            ("TESSERA_PROBE_OVERHEAD", "1"),
            ("FAKE_CUPTI_PROFILER_MS", "2200,2000"),
        ],
        vec![(50, shared(true))],
    );
    assert_eq!(
        record_calls(&log),
        [
            "register",
            "enable",
            "profiler-start",
            "profiler-end",
            "register",
            "enable",
            // At exit, the probe's own records again.
            "disable"
        ],
        "{log}"
    );
    let lost: Vec<usize> = (0..frames.len())
        .filter(|&i| frames[i].flags & FLAG_PROFILER != 0)
        .collect();
    assert!(!lost.is_empty(), "{frames:?}");
    // One unbroken run of them, every one reported off.
    assert_eq!(lost.last().map(|l| l - lost[0] + 1), Some(lost.len()));
    for &i in &lost {
        let f = &frames[i];
        assert_eq!(
            f.flags & (FLAG_DISABLED | FLAG_ALONE),
            FLAG_DISABLED,
            "{f:?}"
        );
        assert!(f.buckets.is_empty() && f.now_ns == 0, "{f:?}");
    }
    let before = &frames[..lost[0]];
    assert!(
        before
            .iter()
            .any(|f| f.flags & FLAG_DISABLED == 0 && f.kernels > 0),
        "{frames:?}"
    );
    let after = &frames[lost[lost.len() - 1] + 1..];
    let back = after.first().expect("frames after the profiler");
    assert_eq!(back.flags & (FLAG_DISABLED | FLAG_PROFILER), 0, "{back:?}");
    assert!(back.flags & FLAG_FULL != 0, "{back:?}");
    // From the last frame before the loss to just before the records came back, every
    // millisecond is untraced: the probe could not see them, so it claims none.
    let seen = before.last().expect("a frame before").now_ns / 1_000_000;
    let lost_ms: Vec<&Bucket> = (seen + 5..back.now_ns / 1_000_000 - 50)
        .filter_map(|b| back.buckets.get(b.checked_sub(back.first_bucket)? as usize))
        .collect();
    assert!(lost_ms.len() > 1_500, "{} ms", lost_ms.len());
    assert!(
        lost_ms.iter().all(|b| b.covered_us == UNTRACED),
        "the lost milliseconds must not read idle: {back:?}"
    );
    let last = after.last().expect("frames");
    assert!(last.kernels > back.kernels, "{last:?} after {back:?}");
}

/// A profiler that never lets CUPTI go (no `cuptiFinalize`): the probe says so to the end, and
/// never turns the profiler's kernel records off, not even at exit.
#[test]
fn a_profiler_that_keeps_cupti_is_reported_to_the_end() {
    let (frames, log) = frames_of_run_sending(
        "profiler-stays",
        &[
            ("PROBE_HOST_MS", "4500"),
            ("TESSERA_PROBE_OVERHEAD", "1"),
            ("FAKE_CUPTI_PROFILER_MS", "1500,1000"),
            ("FAKE_CUPTI_PROFILER_STAYS", "1"),
        ],
        vec![(50, shared(true))],
    );
    assert_eq!(
        record_calls(&log),
        ["register", "enable", "profiler-start", "profiler-end"],
        "{log}"
    );
    let last = frames.last().expect("frames");
    assert_eq!(
        last.flags & (FLAG_DISABLED | FLAG_PROFILER | FLAG_ALONE),
        FLAG_DISABLED | FLAG_PROFILER,
        "{last:?}"
    );
}

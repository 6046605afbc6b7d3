//! Records only where shared, end to end: two processes carry a stand-in for the probe that
//! behaves as the real one does on the wire (`crates/probe`): records off and reported as off
//! until tessera's control message says its device is shared, then a timeline. The fake NVML
//! lists one of them alone on GPU 0 first, then both. tessera must tell neither while one is
//! alone, then tell both; and their timelines must then split the GPU.

use std::process::Child;
use std::time::{Duration, Instant};

use crate::support::{Clients, Exporter};

/// A stand-in probe: reports "off, alone" (wire v1, flags DISABLED|ALONE) until it reads a
/// control message saying shared, and from then on a v2 timeline whose kernels cover
/// `covered` of every millisecond, starting at that moment. Each switch is appended to `log`.
fn stand_in_probe(socket: &std::path::Path, covered: f64, log: &std::path::Path) -> Child {
    crate::support::fake_probe_client(
        socket,
        &[
            format!("--covered={covered}"),
            format!("--records-log={}", log.display()),
        ],
    )
}

fn process_value(m: &str, family: &str, pid: u32) -> Option<f64> {
    m.lines()
        .find(|l| l.starts_with(&format!("{family}{{")) && l.contains(&format!("pid=\"{pid}\"")))
        .and_then(|l| l.rsplit_once(' ')?.1.parse().ok())
}

#[test]
fn a_second_candidate_turns_records_on_and_alone_nothing_is_sent() {
    let dir = tempfile::tempdir().expect("tempdir");
    let socket = dir.path().join("probe.sock");
    let logs = [dir.path().join("a.log"), dir.path().join("b.log")];
    let clients = Clients(vec![
        stand_in_probe(&socket, 0.5, &logs[0]),
        stand_in_probe(&socket, 0.25, &logs[1]),
    ]);
    let (a, b) = (clients.0[0].id(), clients.0[1].id());
    // A alone on GPU 0 for 8 s (room for a slow start under load), then B beside it,
    // time-sliced.
    let shared_at_ms = 8_000;
    let yaml = format!(
        "gpus:\n  - sku: h100-80gb-hbm3\nphases:\n  - at_ms: 0\n    gpus:\n      - {{ gpu: 0, utilization: 50 }}\n    processes:\n      - {{ pid: {a}, gpu: 0, comm: python3, memory_mib: 8000, sm_util: 50 }}\n  - at_ms: {shared_at_ms}\n    gpus:\n      - {{ gpu: 0, utilization: 75 }}\n    processes:\n      - {{ pid: {a}, gpu: 0, comm: python3, memory_mib: 8000, sm_util: 60 }}\n      - {{ pid: {b}, gpu: 0, comm: python3, memory_mib: 4000, sm_util: 15 }}\n"
    );
    let path = dir.path().join("records.yaml");
    std::fs::write(&path, yaml).expect("scenario");
    let started = Instant::now();
    let e = Exporter::builder(&path)
        .arg(format!("--probe.socket={}", socket.display()))
        .start();
    let read = |p: &std::path::Path| std::fs::read_to_string(p).unwrap_or_default();

    // Alone: A's share is NVML's own, and neither probe is told to record.
    e.wait_until("A's share while alone", |e| {
        process_value(&e.metrics(), "gpu_process_sm_utilization_ratio", a).is_some()
    });
    std::thread::sleep(Duration::from_millis(1500));
    assert!(
        started.elapsed() < Duration::from_millis(shared_at_ms - 500),
        "the alone phase ended before it was checked"
    );
    let m = e.metrics();
    let alone = process_value(&m, "gpu_process_sm_utilization_ratio", a);
    assert!(
        alone.is_some_and(|v| (v - 0.5).abs() < 0.05),
        "{alone:?}\n{m}"
    );
    assert_eq!(read(&logs[0]), "", "a process alone was told to record");
    assert_eq!(
        read(&logs[1]),
        "",
        "a process not on a GPU was told to record"
    );
    assert!(
        process_value(&m, "gpu_process_busy_ratio", a).is_none(),
        "{m}"
    );

    // Shared: both are told, and their timelines split the GPU (0.5 and 0.25 of every
    // millisecond, scaled to the device's 75 %).
    e.wait_until("both probes told to record", |_| {
        read(&logs[0]) == "on\n" && read(&logs[1]) == "on\n"
    });
    e.wait_until("both shares from the probes", |e| {
        let m = e.metrics();
        process_value(&m, "gpu_process_busy_ratio", a).is_some()
            && process_value(&m, "gpu_process_busy_ratio", b).is_some()
    });
    std::thread::sleep(Duration::from_millis(500));
    let m = e.metrics();
    let share = |pid| process_value(&m, "gpu_process_sm_utilization_ratio", pid).unwrap_or(-1.0);
    assert!(
        (share(a) - 0.5).abs() < 0.06 && (share(b) - 0.25).abs() < 0.06,
        "{} {}\n{m}",
        share(a),
        share(b)
    );
    // Once on, nothing flaps: still one message each.
    assert_eq!(read(&logs[0]), "on\n");
    assert_eq!(read(&logs[1]), "on\n");
}

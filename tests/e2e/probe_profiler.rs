//! A tenant's own profiler, end to end: two processes report timelines to tessera's probe
//! socket, time-sliced on one GPU, until a profiler in one of them takes CUPTI and its probe
//! says so (wire flag `profiler`, with "off"). tessera must then publish neither tenant's
//! figure, with the reason in the split's why, and publish both again once the profiler has
//! let CUPTI go and the probe's timeline covers the window again.

use crate::support::{self, Clients, Exporter};

fn process_value(m: &str, family: &str, pid: u32) -> Option<f64> {
    m.lines()
        .find(|l| l.starts_with(&format!("{family}{{")) && l.contains(&format!("pid=\"{pid}\"")))
        .and_then(|l| l.rsplit_once(' ')?.1.parse().ok())
}

fn timeline_client(socket: &std::path::Path, covered: f64, extra: &[&str]) -> std::process::Child {
    let mut args = vec![format!("--covered={covered}")];
    args.extend(extra.iter().map(|s| s.to_string()));
    support::fake_probe_client(socket, &args)
}

#[test]
fn a_profiler_in_one_tenant_withholds_both_figures_with_the_reason_until_it_is_gone() {
    let dir = tempfile::tempdir().expect("tempdir");
    let socket = dir.path().join("probe.sock");
    let clients = Clients(vec![
        timeline_client(&socket, 0.4, &["--profiler-after=9", "--profiler-for=8"]),
        timeline_client(&socket, 0.3, &[]),
    ]);
    let (a, b) = (clients.0[0].id(), clients.0[1].id());
    let yaml = format!(
        "gpus:\n  - sku: h100-80gb-hbm3\nphases:\n  - at_ms: 0\n    gpus:\n      - {{ gpu: 0, utilization: 70 }}\n    processes:\n      - {{ pid: {a}, gpu: 0, comm: python3, memory_mib: 8000, sm_util: 60 }}\n      - {{ pid: {b}, gpu: 0, comm: python3, memory_mib: 4000, sm_util: 10 }}\n"
    );
    let path = dir.path().join("profiler.yaml");
    std::fs::write(&path, yaml).expect("scenario");
    let e = Exporter::builder(&path)
        .arg(format!("--probe.socket={}", socket.display()))
        .arg("--web.enable-debug=true")
        .start();
    let both = |m: &str| {
        process_value(m, "gpu_process_busy_ratio", a).is_some()
            && process_value(m, "gpu_process_busy_ratio", b).is_some()
    };
    e.wait_until("both figures from the timelines", |e| both(&e.metrics()));
    e.wait_until("the profiler's reason", |e| {
        e.get("/debug/attribution")
            .is_ok_and(|(_, d)| d.contains("\"why\":\"profiler: a profiler in pid"))
    });
    let m = e.metrics();
    assert_eq!(process_value(&m, "gpu_process_busy_ratio", a), None, "{m}");
    assert_eq!(process_value(&m, "gpu_process_busy_ratio", b), None, "{m}");
    assert!(
        m.lines()
            .any(|l| l.starts_with("gpu_compute_split_info{") && l.contains("method=\"withheld\"")),
        "{m}"
    );
    let (_, debug) = e.get("/debug/attribution").expect("debug page");
    assert!(debug.contains(&format!("\"profiler\":[{a}]")), "{debug}");
    // Gone: the figures come back once the timeline covers the window again.
    e.wait_until("both figures again", |e| both(&e.metrics()));
    e.stop();
    drop(clients);
}

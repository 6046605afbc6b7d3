//! tessera against a real kube-apiserver (and etcd): the pod reflector, DRA objects and the
//! chart's RBAC, as a cluster would serve them. `#[ignore]`d: scripts/test-kube-real.sh starts
//! the control plane and runs them with `--ignored`.
//!
//! No kubelet runs, so the tests play its part: they bind pods to a node by `spec.nodeName`,
//! write each pod's status (container IDs) and serve pod-resources from the fake kubelet. The
//! GPUs come from the fake NVML library; each process's cgroup names the server-assigned UID.

mod kube_real;
mod support;

use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use kube_real::{line, pod, real, run_pod, wait_metrics, write_cgroup, Real, NODE, OTHER_NODE};
use serde_json::{json, Value};
use support::Exporter;
use tessera_demo::fakes::kubelet::{FakeContainer, FakeKubelet, FakeKubeletState, FakePod};
use tessera_exporter::source::podresources::DynamicDevice;

const GPU: [&str; 3] = [
    "GPU-e0000000-0000-0000-0000-000000000000",
    "GPU-e1111111-0000-0000-0000-000000000000",
    "GPU-e2222222-0000-0000-0000-000000000000",
];
/// When pid 9002 (pod late-0) starts on GPU 1, in ms after tessera's NVML init.
const LATE_MS: u64 = 12_000;
const POLL: Duration = Duration::from_secs(1);

fn reflector_scenario() -> String {
    let gpus: String = GPU
        .iter()
        .map(|u| format!("  - {{ sku: h100-80gb-hbm3, uuid: {u} }}\n"))
        .collect();
    let proc = |pid: u32, gpu: u32| {
        format!("      - {{ pid: {pid}, gpu: {gpu}, comm: python3, memory_mib: 1000, sm_util: 40, mem_util: 2 }}\n")
    };
    format!(
        "gpus:\n{gpus}phases:\n  - at_ms: 0\n    processes:\n{}{}  - at_ms: {LATE_MS}\n    processes:\n{}{}{}",
        proc(9001, 0),
        proc(9003, 2),
        proc(9001, 0),
        proc(9003, 2),
        proc(9002, 1)
    )
}

pub fn fake_pod(ns: &str, name: &str, devices: Vec<(String, Vec<String>)>) -> FakePod {
    fake_pod_dyn(ns, name, devices, Vec::new())
}

pub fn fake_pod_dyn(
    ns: &str,
    name: &str,
    devices: Vec<(String, Vec<String>)>,
    dynamic: Vec<DynamicDevice>,
) -> FakePod {
    FakePod {
        namespace: ns.into(),
        name: name.into(),
        containers: vec![FakeContainer {
            name: "main".into(),
            devices,
            dynamic,
        }],
    }
}

fn gpu(n: usize) -> Vec<(String, Vec<String>)> {
    vec![("nvidia.com/gpu".into(), vec![GPU[n].into()])]
}

/// tessera as the chart runs it, with the service account's kubeconfig.
pub fn exporter(real: &Real, scenario: &std::path::Path, socket: &std::path::Path) -> Exporter {
    exporter_with(real, scenario, socket, &[], |_| {})
}

pub fn exporter_with(
    real: &Real,
    scenario: &std::path::Path,
    socket: &std::path::Path,
    args: &[&str],
    procfs: impl FnOnce(&std::path::Path) + 'static,
) -> Exporter {
    let mut b = Exporter::builder(scenario)
        .with_cluster()
        .env("KUBECONFIG", real.tessera_kubeconfig())
        .with_procfs(procfs)
        .arg(format!(
            "--kubelet.pod-resources-socket={}",
            socket.display()
        ))
        .arg(format!("--kubelet.poll-interval={}s", POLL.as_secs()))
        .arg("--kube.pod-labels=team");
    for a in args {
        b = b.arg(*a);
    }
    b.start()
}

fn has_pod(m: &str, pod: &str, extra: &[&str]) -> bool {
    let p = format!("pod=\"{pod}\"");
    let mut needles = vec![p.as_str()];
    needles.extend_from_slice(extra);
    line(m, "gpu_container_memory_used_bytes{", &needles).is_some()
}

#[test]
#[ignore = "needs a real kube-apiserver: scripts/test-kube-real.sh"]
fn reflector_follows_this_nodes_pods_through_an_apiserver_restart() {
    let real = real();
    let ns = "reflector";
    real.namespace(ns);
    real.node(NODE, json!({}));
    real.node(OTHER_NODE, json!({}));
    let web = real.create(pod(
        ns,
        "web-7d9f8c6b5-x2x9q",
        NODE,
        json!({"team": "a", "pod-template-hash": "7d9f8c6b5"}),
        Some(("ReplicaSet", "web-7d9f8c6b5")),
    ));
    run_pod(&real, &web);
    // A pod of another node whose cgroup a GPU process here claims: only a reflector that
    // lists other nodes' pods could name it.
    let elsewhere = real.create(pod(
        ns,
        "elsewhere-0",
        OTHER_NODE,
        json!({"team": "x"}),
        Some(("StatefulSet", "elsewhere")),
    ));
    run_pod(&real, &elsewhere);

    let dir = tempfile::tempdir().unwrap();
    let scenario = dir.path().join("scenario.yaml");
    std::fs::write(&scenario, reflector_scenario()).unwrap();
    let socket = dir.path().join("kubelet.sock");
    let mut state = FakeKubeletState {
        pods: vec![
            fake_pod(ns, "web-7d9f8c6b5-x2x9q", gpu(0)),
            fake_pod(ns, "elsewhere-0", gpu(2)),
        ],
        ..Default::default()
    };
    let kubelet = real
        .rt
        .block_on(FakeKubelet::start(&socket, state.clone()))
        .unwrap();
    let (w, x) = (web.clone(), elsewhere.clone());
    let started = Instant::now();
    let e = exporter_with(&real, &scenario, &socket, &[], move |procfs| {
        write_cgroup(procfs, 9001, &w);
        write_cgroup(procfs, 9003, &x);
    });
    let procfs = e.dir.path().join("proc");

    // ReplicaSet owner + pod-template-hash: the Deployment, from the server's object.
    let web_series = [
        r#"workload_kind="Deployment""#,
        r#"workload="web""#,
        r#"label_team="a""#,
    ];
    let m = wait_metrics(&e, "web's series", Duration::from_secs(20), |m| {
        has_pod(m, "web-7d9f8c6b5-x2x9q", &web_series)
    });
    // The other node's pod: the kubelet names it, the API server must not (no workload).
    assert!(!m.contains(r#"workload="elsewhere""#), "{m}");
    assert!(!m.contains(r#"label_team="x""#), "{m}");

    // A pod created now, whose first GPU process starts at LATE_MS.
    let late = real.create(pod(ns, "late-0", NODE, json!({"team": "b"}), None));
    run_pod(&real, &late);
    write_cgroup(&procfs, 9002, &late);
    state.pods.push(fake_pod(ns, "late-0", gpu(1)));
    kubelet.set_state(state.clone());
    assert!(
        started.elapsed() < Duration::from_millis(LATE_MS),
        "setup ran past the late process's start; raise LATE_MS"
    );
    // The allocation shows as soon as the kubelet reports it; the process, named through its
    // cgroup's pod UID and the server's container status, only once it runs.
    wait_metrics(&e, "late-0's process", Duration::from_secs(30), |m| {
        line(
            m,
            "gpu_process_memory_used_bytes{",
            &[r#"pid="9002""#, r#"pod="late-0""#],
        )
        .is_some()
    });
    // Measured from spawning tessera, before its NVML init: an upper bound on the delay.
    let delay = started
        .elapsed()
        .saturating_sub(Duration::from_millis(LATE_MS));
    eprintln!("late-0 appeared {delay:?} after its first GPU process");
    assert!(delay <= POLL, "late-0 took {delay:?} (> {POLL:?})");

    // A label change on the server follows to label_team.
    real.patch(&web, json!({"metadata": {"labels": {"team": "c"}}}));
    wait_metrics(&e, "web's new label", Duration::from_secs(10), |m| {
        has_pod(m, "web-7d9f8c6b5-x2x9q", &[r#"label_team="c""#])
    });

    // The API server restarts: every watch breaks. A scraper checks that no scrape in the
    // meantime loses web's or late-0's metadata.
    let stop = Arc::new(AtomicBool::new(false));
    let lost = Arc::new(AtomicU32::new(0));
    let port = e.port;
    let watcher = {
        let (stop, lost) = (stop.clone(), lost.clone());
        std::thread::spawn(move || {
            while !stop.load(Ordering::Relaxed) {
                if let Ok((200, _, m)) = support::http_get(port, "/metrics") {
                    let late_labelled = has_pod(&m, "late-0", &[r#"label_team="b""#])
                        || has_pod(&m, "late-0", &[r#"label_team="d""#]);
                    if !has_pod(&m, "web-7d9f8c6b5-x2x9q", &[r#"label_team="c""#]) || !late_labelled
                    {
                        lost.fetch_add(1, Ordering::Relaxed);
                    }
                }
                std::thread::sleep(Duration::from_millis(100));
            }
        })
    };
    real.restart_apiserver();
    // After the restart: a change made now must arrive through the re-established watch.
    real.patch(&late, json!({"metadata": {"labels": {"team": "d"}}}));
    wait_metrics(
        &e,
        "late-0's label after the restart",
        Duration::from_secs(60),
        |m| has_pod(m, "late-0", &[r#"label_team="d""#]),
    );
    stop.store(true, Ordering::Relaxed);
    watcher.join().unwrap();
    let m = e.metrics();
    assert!(has_pod(&m, "web-7d9f8c6b5-x2x9q", &web_series[..2]), "{m}");
    assert_eq!(
        lost.load(Ordering::Relaxed),
        0,
        "{} scrapes during the restart lost a pod's metadata",
        lost.load(Ordering::Relaxed)
    );

    // Deleted on the server while the kubelet still reports it: tessera drops the API's
    // metadata (the kubelet's name stays).
    real.delete(&web);
    let m = wait_metrics(&e, "web's metadata gone", Duration::from_secs(20), |m| {
        has_pod(m, "web-7d9f8c6b5-x2x9q", &[]) && !m.contains(r#"workload="web""#)
    });
    assert!(has_pod(&m, "late-0", &[r#"label_team="d""#]), "{m}");
    assert!(!m.contains(r#"workload="elsewhere""#), "{m}");
    assert_eq!(
        support::value(
            &m,
            r#"tessera_collector_success{node="test-node",collector="kube"}"#
        ),
        Some(1.0),
        "{m}"
    );
    let log = e.stop();
    real.rt.block_on(kubelet.stop());
    // A restarted kube-apiserver can refuse requests for a few seconds, until its RBAC
    // authorizer has synced; a refusal must end in recovery, never stick.
    let refused = log.rfind("403");
    let recovered = log.rfind(r#"kubernetes source recovered part="pods""#);
    assert!(
        refused.is_none() || recovered > refused,
        "tessera was refused and did not recover:\n{log}"
    );
}

/// A JSON string value at `path` (slash-separated) of `v`.
pub fn str_at<'a>(v: &'a Value, path: &str) -> &'a str {
    path.split('/')
        .fold(v, |v, k| &v[k])
        .as_str()
        .unwrap_or_default()
}

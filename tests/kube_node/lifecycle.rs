//! What the kubelet and the runtime do to a pod over its life, and tessera's series through it:
//! an init container that held the GPU, a container restarted in place, a pod deleted, and the
//! kubelet and containerd restarted under running pods.

use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::json;

use super::{
    assert_series, gpu_uuid, gpus, has_one, matching, node, pod, running, Node, Tessera, POLL,
    SAMPLE, SLEEP,
};
use crate::support;

/// One GPU offered whole, and tessera with the given processes (`(pid file, extra keys)`) on it.
fn one_gpu(n: &Node, uuid: &str, procs: &[&str]) -> Tessera {
    n.devices(&[("nvidia.com/gpu", vec![uuid.to_owned()])]);
    let procs: String = procs
        .iter()
        .map(|p| {
            format!(
                "      - {{ pid_file: {}, gpu: 0, memory_mib: 2048, sm_util: 25 }}\n",
                n.pid_file(p).display()
            )
        })
        .collect();
    n.tessera(&format!(
        "gpus:\n  - {{ sku: h100-80gb-hbm3, uuid: {uuid} }}\nphases:\n  - at_ms: 0\n    processes:\n{procs}"
    ))
}

fn held<'a>(ns: &'a str, pod: &'a str, container: &'a str, uuid: &'a str) -> [(&'a str, &'a str); 5] {
    [
        ("namespace", ns),
        ("pod", pod),
        ("container", container),
        ("uuid", uuid),
        ("sharing_mode", "exclusive"),
    ]
}

fn process(m: &str, pid: u32) -> Vec<super::Series> {
    matching(m, "gpu_process_memory_used_bytes", &[("pid", &pid.to_string())])
}

#[test]
#[ignore = "needs a real node: scripts/test-kube-node.sh"]
fn an_init_container_holds_the_gpu_then_hands_it_to_the_app_container() {
    let n = node();
    let ns = "init";
    n.clean(&[ns]);
    let gpu = gpu_uuid(0x1417);
    let t = one_gpu(&n, &gpu, &["warmup", "app"]);
    let mut spec = pod(ns, "prep", &[("main", SLEEP, gpus("nvidia.com/gpu", 1))]);
    // It ends when told (SIGTERM, exit 0), like an init step that warmed a model up on the GPU.
    spec["spec"]["initContainers"] = json!([super::container(
        "warmup",
        "trap 'exit 0' TERM; while :; do sleep 1; done",
        gpus("nvidia.com/gpu", 1)
    )]);
    n.create(spec);
    let warmup = n.track("warmup", &n.wait_running(ns, "prep", "warmup"), &gpu);
    let m = t.wait("the init container's process", Duration::from_secs(30), |m| {
        process(m, warmup).len() == 1
    });
    assert_series(
        &m,
        "gpu_process_memory_used_bytes",
        &[("pid", &warmup.to_string())],
        &held(ns, "prep", "warmup", &gpu),
    );
    // The kubelet lends an init container's devices to the app containers (they never run at
    // once): the init container used the device it was given, not someone else's.
    assert!(
        matching(&m, "gpu_container_unallocated_use", &[("container", "warmup")])
            .iter()
            .all(|s| s.value == 0.0),
        "the init container ran on the device the kubelet allocated it\n{}",
        super::gpu_lines(&m)
    );

    // SAFETY: kill(2) on the pid of a process this test's pod runs.
    unsafe { libc::kill(warmup as i32, libc::SIGTERM) };
    let app = n.track("app", &n.wait_running(ns, "prep", "main"), &gpu);
    let m = t.wait("the app container's process, and the init container's gone", Duration::from_secs(30), |m| {
        process(m, app).len() == 1 && process(m, warmup).is_empty()
    });
    let h = held(ns, "prep", "main", &gpu);
    assert_series(&m, "gpu_process_memory_used_bytes", &[("pid", &app.to_string())], &h);
    assert_series(
        &m,
        "gpu_container_allocation",
        &[("pod", "prep"), ("container", "main")],
        &[h.as_slice(), &[("device_id", gpu.as_str())]].concat(),
    );
    assert!(
        !m.lines().any(|l| l.contains(r#"container="warmup""#)),
        "nothing left of the finished init container:\n{}",
        super::gpu_lines(&m)
    );
    n.clean(&[ns]);
}

#[test]
#[ignore = "needs a real node: scripts/test-kube-node.sh"]
fn a_container_restarted_in_place_keeps_its_pod_and_gets_its_new_process() {
    let n = node();
    let ns = "restart";
    n.clean(&[ns]);
    let gpu = gpu_uuid(0x4e5);
    let t = one_gpu(&n, &gpu, &["worker"]);
    n.create(pod(ns, "worker", &[("main", SLEEP, gpus("nvidia.com/gpu", 1))]));
    let first = n.wait_running(ns, "worker", "main");
    let old = n.track("worker", &first, &gpu);
    t.wait("the first process", Duration::from_secs(30), |m| process(m, old).len() == 1);

    // The process dies; the kubelet starts a new container in the same pod.
    // SAFETY: kill(2) on the pid of a process this test's pod runs.
    unsafe { libc::kill(old as i32, libc::SIGKILL) };
    let mut second = None;
    n.wait_pod(ns, "worker", "a restarted container", Duration::from_secs(60), |p| {
        second = running(p, "main").filter(|r| r.id != first.id);
        second.is_some()
    });
    let second = second.expect("restarted");
    assert_eq!(second.restarts, 1);
    let new = n.track("worker", &second, &gpu);
    let m = t.wait("the new process, the old one gone", Duration::from_secs(30), |m| {
        process(m, new).len() == 1 && process(m, old).is_empty()
    });
    let h = held(ns, "worker", "main", &gpu);
    assert_series(&m, "gpu_process_memory_used_bytes", &[("pid", &new.to_string())], &h);
    let c = assert_series(&m, "gpu_container_memory_used_bytes", &[("pod", "worker")], &h);
    assert_eq!(c.value, 2048.0 * 1048576.0, "the new process's memory, once");
    n.clean(&[ns]);
}

#[test]
#[ignore = "needs a real node: scripts/test-kube-node.sh"]
fn a_deleted_pods_series_are_gone_within_one_poll() {
    let n = node();
    let ns = "deleted";
    n.clean(&[ns]);
    let gpu = gpu_uuid(0xde1);
    let t = one_gpu(&n, &gpu, &["victim"]);
    n.create(pod(ns, "victim", &[("main", SLEEP, gpus("nvidia.com/gpu", 1))]));
    let pid = n.track("victim", &n.wait_running(ns, "victim", "main"), &gpu);
    let m = t.wait("the pod's series", Duration::from_secs(30), |m| {
        process(m, pid).len() == 1 && has_one(m, "gpu_container_allocation", &[("pod", "victim")])
    });
    assert_series(
        &m,
        "gpu_container_allocation",
        &[("pod", "victim")],
        &held(ns, "victim", "main", &gpu),
    );
    n.delete(ns, "victim");
    let gone_from_api = Instant::now();
    t.wait("no series of the deleted pod", Duration::from_secs(30), |m| {
        !m.contains(r#"pod="victim""#)
    });
    let took = gone_from_api.elapsed();
    eprintln!("victim's series went {took:?} after the API server removed the pod");
    // One poll of the kubelet, and the sample that publishes it.
    assert!(took <= POLL + SAMPLE, "took {took:?}, more than one poll ({POLL:?}) and a sample");
    let m = t.metrics();
    let s = assert_series(&m, "gpu_sharers", &[("uuid", gpu.as_str())], &[("sharing_mode", "unallocated")]);
    assert_eq!(s.value, 0.0);
    n.clean(&[ns]);
}

/// Scrapes until stopped, counting scrapes in which the pod's process lost its labels.
struct Watch {
    stop: Arc<AtomicBool>,
    lost: Arc<AtomicU32>,
    seen: Arc<AtomicU32>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Watch {
    fn start(port: u16, pid: u32, want: Vec<(String, String)>) -> Watch {
        let stop = Arc::new(AtomicBool::new(false));
        let lost = Arc::new(AtomicU32::new(0));
        let seen = Arc::new(AtomicU32::new(0));
        let thread = {
            let (stop, lost, seen) = (Arc::clone(&stop), Arc::clone(&lost), Arc::clone(&seen));
            std::thread::spawn(move || {
                let pairs: Vec<(&str, &str)> =
                    want.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
                while !stop.load(Ordering::Relaxed) {
                    if let Ok((200, _, m)) = support::http_get(port, "/metrics") {
                        seen.fetch_add(1, Ordering::Relaxed);
                        let found = process(&m, pid);
                        let labelled = found.len() == 1
                            && pairs.iter().all(|(k, v)| {
                                found[0].labels.get(*k).map(String::as_str) == Some(*v)
                            });
                        if !labelled {
                            lost.fetch_add(1, Ordering::Relaxed);
                        }
                    }
                    std::thread::sleep(Duration::from_millis(100));
                }
            })
        };
        Watch {
            stop,
            lost,
            seen,
            thread: Some(thread),
        }
    }

    /// (scrapes that lost the labels, scrapes in all)
    fn finish(mut self) -> (u32, u32) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
        (self.lost.load(Ordering::Relaxed), self.seen.load(Ordering::Relaxed))
    }
}

fn survives_a_restart_of(what: &str, ns: &str, uuid_n: u32) {
    let n = node();
    n.clean(&[ns]);
    let gpu = gpu_uuid(uuid_n);
    let t = one_gpu(&n, &gpu, &["steady"]);
    n.create(pod(ns, "steady", &[("main", SLEEP, gpus("nvidia.com/gpu", 1))]));
    let before = n.wait_running(ns, "steady", "main");
    let pid = n.track("steady", &before, &gpu);
    let h = held(ns, "steady", "main", &gpu);
    let m = t.wait("the pod's series", Duration::from_secs(30), |m| {
        process(m, pid).len() == 1 && has_one(m, "gpu_container_allocation", &[("pod", "steady")])
    });
    assert_series(&m, "gpu_process_memory_used_bytes", &[("pid", &pid.to_string())], &h);

    let watch = Watch::start(
        t.port,
        pid,
        h.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect(),
    );
    let started = Instant::now();
    n.restart(what);
    // The kubelet is back (or never left): pod-resources answers again.
    let m = t.wait("pod-resources answering after the restart", Duration::from_secs(60), |m| {
        support::value(m, &format!(r#"tessera_collector_success{{node="{}",collector="podresources"}}"#, n.name()))
            == Some(1.0)
            && has_one(m, "gpu_container_allocation", &[("pod", "steady")])
    });
    std::thread::sleep(POLL * 2);
    let (lost, seen) = watch.finish();
    eprintln!("{what} restart: {:?}, {seen} scrapes, {lost} without the pod's labels", started.elapsed());
    assert_eq!(lost, 0, "{lost} of {seen} scrapes lost the pod's labels during the {what} restart");
    assert_series(&m, "gpu_container_allocation", &[("pod", "steady")], &h);
    assert_series(&t.metrics(), "gpu_process_memory_used_bytes", &[("pid", &pid.to_string())], &h);
    // The pod itself was left alone.
    let after = running(&n.get(ns, "steady").expect("pod"), "main").expect("running");
    assert_eq!((after.id, after.restarts), (before.id, 0), "the container was not restarted");
    n.clean(&[ns]);
}

#[test]
#[ignore = "needs a real node: scripts/test-kube-node.sh"]
fn a_kubelet_restart_keeps_every_series() {
    survives_a_restart_of("kubelet", "kubelet-restart", 0x4b1);
}

#[test]
#[ignore = "needs a real node: scripts/test-kube-node.sh"]
fn a_containerd_restart_keeps_every_series() {
    survives_a_restart_of("containerd", "containerd-restart", 0xc7d);
}

//! What the kubelet and the runtime do to a pod over its life, and tessera's series through it:
//! an init container that held the GPU, a container restarted in place, a pod deleted, and the
//! kubelet and containerd restarted under running pods.

use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::json;

use super::{
    gpu_uuid, gpus, matching, node, pod, running, scenario, want, Gpu, Node, Tessera, Tracked,
    Want, POLL, SAMPLE, SLEEP,
};
use crate::support;

const LIMIT: Duration = Duration::from_secs(30);

/// One GPU offered whole (`nvidia.com/gpu`).
fn one_gpu(n: &Node, uuid: &str) {
    n.devices(&[("nvidia.com/gpu", vec![uuid.to_owned()])]);
}

/// tessera with each named pid file's process on the GPU.
fn tessera(n: &Node, uuid: &str, procs: &[&str]) -> Tessera {
    let procs: Vec<(&str, &str, &str)> = procs
        .iter()
        .map(|p| (*p, uuid, "memory_mib: 2048, sm_util: 25"))
        .collect();
    n.tessera(&scenario(n, &[Gpu::whole(uuid)], &procs))
}

fn held<'a>(
    ns: &'a str,
    pod: &'a str,
    container: &'a str,
    uuid: &'a str,
) -> [(&'a str, &'a str); 5] {
    [
        ("namespace", ns),
        ("pod", pod),
        ("container", container),
        ("uuid", uuid),
        ("sharing_mode", "exclusive"),
    ]
}

fn process(m: &str, pid: u32) -> Vec<super::Series> {
    matching(
        m,
        "gpu_process_memory_used_bytes",
        &[("pid", &pid.to_string())],
    )
}

fn process_of(t: &Tracked, h: &[(&str, &str)]) -> Want {
    want(
        "gpu_process_memory_used_bytes",
        &[("pid", &t.pid.to_string())],
        h,
    )
}

#[test]
#[ignore = "needs a real node: scripts/test-kube-node.sh"]
fn an_init_container_holds_the_gpu_then_hands_it_to_the_app_container() {
    let n = node();
    let ns = "init";
    let _clean = n.cleanup(ns);
    let gpu = gpu_uuid(0x1417);
    one_gpu(&n, &gpu);
    let mut spec = pod(ns, "prep", &[("main", SLEEP, gpus("nvidia.com/gpu", 1))]);
    // It ends when told (SIGTERM, exit 0), like an init step that warmed a model up on the GPU.
    spec["spec"]["initContainers"] = json!([super::container(
        "warmup",
        "trap 'exit 0' TERM; while :; do sleep 1; done",
        gpus("nvidia.com/gpu", 1)
    )]);
    n.create(spec);
    let warmup = n.track("warmup", &n.wait_running(ns, "prep", "warmup"));
    assert_eq!(warmup.device, gpu);
    let t = tessera(&n, &gpu, &["warmup", "app"]);
    let m = t.expect(
        "the init container's process",
        LIMIT,
        &[process_of(&warmup, &held(ns, "prep", "warmup", &gpu))],
    );
    // The kubelet lends an init container's devices to the app containers (they never run at
    // once): the init container used the device its pod was given, not someone else's.
    assert!(
        matching(
            &m,
            "gpu_container_unallocated_use",
            &[("container", "warmup")]
        )
        .iter()
        .all(|s| s.value == 0.0),
        "the init container ran on the device the kubelet allocated it\n{}",
        super::gpu_lines(&m)
    );

    // SAFETY: kill(2) on the pid of a process this test's pod runs.
    unsafe { libc::kill(warmup.pid as i32, libc::SIGTERM) };
    let app = n.track("app", &n.wait_running(ns, "prep", "main"));
    assert_eq!(
        app.device, gpu,
        "the app container reuses the init container's device"
    );
    let h = held(ns, "prep", "main", &gpu);
    let m = t.expect(
        "the app container's process",
        LIMIT,
        &[
            process_of(&app, &h),
            want(
                "gpu_container_allocation",
                &[("pod", "prep"), ("container", "main")],
                &[h.as_slice(), &[("device_id", gpu.as_str())]].concat(),
            ),
        ],
    );
    let m = if process(&m, warmup.pid).is_empty() {
        m
    } else {
        t.wait("the init container's process gone", LIMIT, |m| {
            process(m, warmup.pid).is_empty()
        })
    };
    assert!(
        !m.lines().any(|l| l.contains(r#"container="warmup""#)),
        "nothing left of the finished init container:\n{}",
        super::gpu_lines(&m)
    );
}

#[test]
#[ignore = "needs a real node: scripts/test-kube-node.sh"]
fn a_container_restarted_in_place_keeps_its_pod_and_gets_its_new_process() {
    let n = node();
    let ns = "restart";
    let _clean = n.cleanup(ns);
    let gpu = gpu_uuid(0x4e5);
    one_gpu(&n, &gpu);
    n.create(pod(
        ns,
        "worker",
        &[("main", SLEEP, gpus("nvidia.com/gpu", 1))],
    ));
    let first = n.wait_running(ns, "worker", "main");
    let old = n.track("worker", &first);
    let t = tessera(&n, &gpu, &["worker"]);
    let h = held(ns, "worker", "main", &gpu);
    t.expect("the first process", LIMIT, &[process_of(&old, &h)]);

    // The process dies; the kubelet starts a new container in the same pod.
    // SAFETY: kill(2) on the pid of a process this test's pod runs.
    unsafe { libc::kill(old.pid as i32, libc::SIGKILL) };
    let mut second = None;
    n.wait_pod(
        ns,
        "worker",
        "a restarted container",
        Duration::from_secs(60),
        |p| {
            second = running(p, "main").filter(|r| r.id != first.id);
            second.is_some()
        },
    );
    let second = second.expect("restarted");
    assert_eq!(second.restarts, 1);
    let new = n.track("worker", &second);
    assert_eq!(new.device, gpu, "the same device after the restart");
    let m = t.expect(
        "the new process",
        LIMIT,
        &[
            process_of(&new, &h),
            // The new process's memory, once.
            want("gpu_container_memory_used_bytes", &[("pod", "worker")], &h)
                .value(2048.0 * 1048576.0),
        ],
    );
    assert!(process(&m, old.pid).is_empty(), "the old process is gone");
}

#[test]
#[ignore = "needs a real node: scripts/test-kube-node.sh"]
fn a_deleted_pods_series_are_gone_within_one_poll() {
    let n = node();
    let ns = "deleted";
    let _clean = n.cleanup(ns);
    let gpu = gpu_uuid(0xde1);
    one_gpu(&n, &gpu);
    n.create(pod(
        ns,
        "victim",
        &[("main", SLEEP, gpus("nvidia.com/gpu", 1))],
    ));
    let victim = n.track("victim", &n.wait_running(ns, "victim", "main"));
    let t = tessera(&n, &gpu, &["victim"]);
    let h = held(ns, "victim", "main", &gpu);
    t.expect(
        "the pod's series",
        LIMIT,
        &[
            process_of(&victim, &h),
            want("gpu_container_allocation", &[("pod", "victim")], &h),
        ],
    );
    n.delete(ns, "victim");
    let gone_from_api = Instant::now();
    t.wait("no series of the deleted pod", LIMIT, |m| {
        !m.contains(r#"pod="victim""#)
    });
    let took = gone_from_api.elapsed();
    eprintln!("victim's series went {took:?} after the API server removed the pod");
    // One poll of the kubelet, and the sample that publishes it.
    assert!(
        took <= POLL + SAMPLE,
        "took {took:?}, more than one poll ({POLL:?}) and a sample"
    );
    t.expect(
        "the GPU free again",
        LIMIT,
        &[want(
            "gpu_sharers",
            &[("uuid", gpu.as_str())],
            &[("sharing_mode", "unallocated")],
        )
        .value(0.0)],
    );
}

/// Scrapes until stopped, keeping each scrape (its GPU series) that missed a want.
struct Watch {
    stop: Arc<AtomicBool>,
    seen: Arc<AtomicU32>,
    thread: Option<std::thread::JoinHandle<Vec<String>>>,
}

impl Watch {
    fn start(port: u16, wants: Vec<Want>) -> Watch {
        let stop = Arc::new(AtomicBool::new(false));
        let seen = Arc::new(AtomicU32::new(0));
        let thread = {
            let (stop, seen) = (Arc::clone(&stop), Arc::clone(&seen));
            std::thread::spawn(move || {
                let mut lost = Vec::new();
                while !stop.load(Ordering::Relaxed) {
                    if let Ok((200, _, m)) = support::http_get(port, "/metrics") {
                        seen.fetch_add(1, Ordering::Relaxed);
                        if !wants.iter().all(|w| w.holds(&m)) {
                            lost.push(super::gpu_lines(&m));
                        }
                    }
                    std::thread::sleep(Duration::from_millis(100));
                }
                lost
            })
        };
        Watch {
            stop,
            seen,
            thread: Some(thread),
        }
    }

    /// (the scrapes that missed a want, how many scrapes in all)
    fn finish(mut self) -> (Vec<String>, u32) {
        self.stop.store(true, Ordering::Relaxed);
        let lost = self
            .thread
            .take()
            .and_then(|t| t.join().ok())
            .unwrap_or_default();
        (lost, self.seen.load(Ordering::Relaxed))
    }
}

fn survives_a_restart_of(what: &str, ns: &'static str, uuid_n: u32) {
    let n = node();
    let _clean = n.cleanup(ns);
    let gpu = gpu_uuid(uuid_n);
    one_gpu(&n, &gpu);
    n.create(pod(
        ns,
        "steady",
        &[("main", SLEEP, gpus("nvidia.com/gpu", 1))],
    ));
    let before = n.wait_running(ns, "steady", "main");
    let steady = n.track("steady", &before);
    let t = tessera(&n, &gpu, &["steady"]);
    let h = held(ns, "steady", "main", &gpu);
    let wants = [
        process_of(&steady, &h),
        want("gpu_container_allocation", &[("pod", "steady")], &h),
    ];
    t.expect("the pod's series", LIMIT, &wants);

    let watch = Watch::start(t.port, wants.to_vec());
    let started = Instant::now();
    n.restart(what);
    // pod-resources answers again (the kubelet is back, or never left).
    let success = format!(
        r#"tessera_collector_success{{node="{}",collector="podresources"}}"#,
        n.name()
    );
    t.wait(
        "pod-resources answering after the restart",
        Duration::from_secs(60),
        |m| support::value(m, &success) == Some(1.0),
    );
    std::thread::sleep(POLL * 3);
    let (lost, seen) = watch.finish();
    eprintln!(
        "{what} restart: {:?}, {seen} scrapes, {} without the pod's series as before",
        started.elapsed(),
        lost.len()
    );
    assert!(
        lost.is_empty(),
        "{} of {seen} scrapes during the {what} restart lost the pod's series; the first:\n{}",
        lost.len(),
        lost.first().map(String::as_str).unwrap_or_default()
    );
    t.expect("the pod's series after the restart", LIMIT, &wants);
    // The pod itself was left alone.
    let after = running(&n.get(ns, "steady").expect("pod"), "main").expect("running");
    assert_eq!(
        (after.id, after.restarts),
        (before.id, 0),
        "the container was not restarted"
    );
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

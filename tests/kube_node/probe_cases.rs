//! The CUDA probe in tenant pods on the real node (probe.rs sets them up), each case asserting
//! exact namespace/pod/container/uuid labels and the probe's figures on them:
//!   - two time-sliced pods on one GPU, both split by their probes: one starts a worker
//!     process, whose probe reports for the same pod; the other runs as another user (the
//!     socket's mode lets it connect);
//!   - a pod on GPU 1 whose environment names GPU 0: its figures are GPU 1's;
//!   - a pod holding no GPU that writes to the socket: nothing shown, every report counted;
//!   - the tenant's container restarted in place: its old processes' series gone, the new ones';
//!
//! probe_faults.rs has an image without CUPTI, and the planted faults.
//!
//! The stand-in CUPTI runs `FAKE_CUPTI_KERNELS_PER_FLUSH` 1 µs kernels a second, evenly spread:
//! a process's busy ratio is that rate times 1 µs.

use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::time::Duration;

use serde_json::Value;

use super::probe::{
    self, create_tenant, exporter, install_policy, labelled_namespace, wait_policy, Injection,
    Tenant, LIBRARY, TENANT,
};
use super::probe_checks::{near, nowhere, one, wait_checks, wait_child, Check, Proc};
use super::{gpu_uuid, node, scenario, Gpu, Node, Scraped, Tracked};

pub(super) const LIMIT: Duration = Duration::from_secs(45);
/// A figure from the stand-in's evenly spread kernels reads within this of its rate.
const TOLERANCE: f64 = 0.25;

pub(super) fn rate(kernels_per_second: u32) -> f64 {
    f64::from(kernels_per_second) * 1e-6
}

/// A probed tenant: its pod, its host PID and what its figures should be.
pub(super) struct Probed {
    pub pod: &'static str,
    pub pid: u32,
    pub uuid: String,
    pub busy: f64,
}

impl Probed {
    fn labels<'a>(&'a self, ns: &'a str) -> [(&'a str, &'a str); 5] {
        [
            ("namespace", ns),
            ("pod", self.pod),
            ("container", "main"),
            ("uuid", self.uuid.as_str()),
            ("sharing_mode", "time-slicing"),
        ]
    }

    /// Its probe reports: its kernel count, under exactly its pod's labels and its device.
    pub(super) fn reports(&self, ns: &str, m: &str) -> (String, Check) {
        let pid = self.pid.to_string();
        (
            format!("{} (host pid {pid}): its kernel count", self.pod),
            one(
                m,
                "gpu_process_kernels_total",
                &[("pid", &pid)],
                &self.labels(ns),
            )
            .map(|_| ()),
        )
    }

    /// And its figure, the busy ratio it ran at, on the same series.
    pub(super) fn checks(&self, ns: &str, m: &str) -> Vec<(String, Check)> {
        let pid = self.pid.to_string();
        vec![
            self.reports(ns, m),
            (
                format!("{} (host pid {pid}): its busy ratio", self.pod),
                one(
                    m,
                    "gpu_process_busy_ratio",
                    &[("pid", &pid)],
                    &self.labels(ns),
                )
                .and_then(|s| near("busy", s.value, self.busy, TOLERANCE)),
            ),
        ]
    }
}

/// The container's figure: the sum of its processes'.
fn container_check(m: &str, ns: &str, pod: &str, uuid: &str, busy: f64) -> (String, Check) {
    (
        format!("{pod}: its container's busy ratio"),
        one(
            m,
            "gpu_container_busy_ratio",
            &[("namespace", ns), ("pod", pod)],
            &[
                ("container", "main"),
                ("uuid", uuid),
                ("sharing_mode", "time-slicing"),
            ],
        )
        .and_then(|s| near("busy", s.value, busy, TOLERANCE)),
    )
}

/// The GPU's split came from its probes.
fn split_check(m: &str, uuid: &str) -> (String, Check) {
    (
        format!("{uuid}: split by its probes"),
        one(
            m,
            "gpu_compute_split_info",
            &[("uuid", uuid)],
            &[("method", "probe")],
        )
        .map(|_| ()),
    )
}

pub(super) fn track(n: &Node, ns: &str, pod: &str) -> Tracked {
    n.track(pod, &n.wait_running(ns, pod, "main"))
}

/// The policy really changed the pod: the variable and the two read-only hostPath mounts, none
/// of which its spec had.
pub(super) fn assert_injected(pod: &Value, injection: Injection, variable: bool) {
    let (env, mounts) = probe::injected(pod);
    let want: Vec<(String, String, bool)> = ["/opt/tessera/lib", "/run/tessera"]
        .iter()
        .map(|p| (p.to_string(), p.to_string(), true))
        .collect();
    assert_eq!(mounts, want, "{injection:?}: {pod:#}");
    assert_eq!(
        env.as_deref(),
        variable.then_some(LIBRARY),
        "{injection:?}: {pod:#}"
    );
}

/// No series of `family` has `key=value`.
pub(super) fn absent(m: &str, family: &str, key: &str, value: &str) -> Check {
    let n = super::series(m, family)
        .iter()
        .filter(|s| s.labels.get(key).map(String::as_str) == Some(value))
        .count();
    if n == 0 {
        Ok(())
    } else {
        Err(format!("{n} {family} series with {key}={value}"))
    }
}

fn refused(m: &str, reason: &str) -> Result<f64, String> {
    one(
        m,
        "tessera_probe_reports_refused_total",
        &[("reason", reason)],
        &[],
    )
    .map(|s| s.value)
}

#[test]
#[ignore = "needs a real node: scripts/test-kube-node.sh"]
fn probed_tenants_in_pods_report_for_their_own_pod_and_device() {
    let n = node();
    let ns = "probe-tenants";
    let _exporter = n.cleanup("tessera");
    let _tenants = n.cleanup(ns);
    let (g0, g1) = (gpu_uuid(0x0be0), gpu_uuid(0x0be1));
    // Two GPUs, two time-slicing replicas each; the resource name pins each pod's GPU.
    n.devices(&[
        (
            "nvidia.com/gpu",
            vec![format!("{g0}::0"), format!("{g0}::1")],
        ),
        (
            "nvidia.com/gpu.shared",
            vec![format!("{g1}::0"), format!("{g1}::1")],
        ),
    ]);
    let injection = install_policy(&n, false);
    labelled_namespace(&n, ns, "enabled");
    wait_policy(&n, ns, injection, true);
    let scen = scenario(
        &n,
        &[Gpu::whole(&g0), Gpu::whole(&g1)],
        &[
            ("ts-a", &g0, "memory_mib: 1024, sm_util: 2"),
            ("ts-a-worker", &g0, "memory_mib: 512, sm_util: 2"),
            ("ts-b", &g0, "memory_mib: 1024, sm_util: 2"),
            ("liar", &g1, "memory_mib: 1024, sm_util: 2"),
            ("gpu1-b", &g1, "memory_mib: 1024, sm_util: 2"),
        ],
    );
    let t = exporter(&n, &scen);
    // The init container copied the image's probe where the policy mounts it from.
    let lib = n.dir.join("node/probe-library/libtessera_probe.so");
    let meta = std::fs::metadata(&lib).expect("install-probe put the library on the node");
    assert_eq!(meta.permissions().mode() & 0o777, 0o755);

    let kernels = |k: u32| ("FAKE_CUPTI_KERNELS_PER_FLUSH", k.to_string());
    let tenants = [
        Tenant {
            name: "ts-a",
            resource: Some("nvidia.com/gpu"),
            image: TENANT,
            env: vec![
                kernels(15_000),
                ("TENANT_WORKERS", "1".into()),
                ("TENANT_WORKER_KERNELS", "15000".into()),
            ],
            uid: None,
            by_hand: false,
        },
        Tenant {
            name: "ts-b",
            resource: Some("nvidia.com/gpu"),
            image: TENANT,
            env: vec![kernels(25_000)],
            uid: Some(65534),
            by_hand: false,
        },
        // Inside its container its one GPU is device 0, and it says GPU 0 is where it runs; the
        // kubelet gave it GPU 1, where NVML lists it.
        Tenant {
            name: "liar",
            resource: Some("nvidia.com/gpu.shared"),
            image: TENANT,
            env: vec![
                kernels(15_000),
                ("CUDA_VISIBLE_DEVICES", "0".into()),
                ("TENANT_CLAIMS_GPU", g0.clone()),
            ],
            uid: None,
            by_hand: false,
        },
        Tenant {
            name: "gpu1-b",
            resource: Some("nvidia.com/gpu.shared"),
            image: TENANT,
            env: vec![kernels(25_000)],
            uid: None,
            by_hand: false,
        },
        Tenant {
            name: "stray",
            resource: None,
            image: TENANT,
            env: vec![kernels(25_000)],
            uid: None,
            by_hand: true,
        },
    ];
    for tenant in &tenants {
        let pod = create_tenant(&n, ns, tenant, injection);
        if !tenant.by_hand {
            assert_injected(&pod, injection, true);
        }
    }
    let a = track(&n, ns, "ts-a");
    let worker = wait_child(a.pid);
    std::fs::write(n.pid_file("ts-a-worker"), format!("{worker}\n")).expect("pid file");
    let b = track(&n, ns, "ts-b");
    let liar = track(&n, ns, "liar");
    let b1 = track(&n, ns, "gpu1-b");
    let stray = n.task_pid(&n.wait_running(ns, "stray", "main").id);
    for (t, gpu) in [(&a, &g0), (&b, &g0), (&liar, &g1), (&b1, &g1)] {
        assert!(t.device.starts_with(gpu.as_str()), "{t:?} on {gpu}");
    }
    // Across the PID namespace: each tenant is PID 1 inside, its worker another PID inside, and
    // the other user's tenant is uid 65534.
    assert_eq!(
        Proc::of(a.pid).nspid().last(),
        Some(&1),
        "ts-a is its container's PID 1"
    );
    let inside = Proc::of(worker).nspid();
    assert!(
        inside.len() == 2 && inside[0] == worker && inside[1] != worker,
        "{inside:?}"
    );
    assert_eq!(Proc::of(b.pid).uid(), Some(65534));

    let probed = [
        Probed {
            pod: "ts-a",
            pid: a.pid,
            uuid: g0.clone(),
            busy: rate(15_000),
        },
        Probed {
            pod: "ts-a",
            pid: worker,
            uuid: g0.clone(),
            busy: rate(15_000),
        },
        Probed {
            pod: "ts-b",
            pid: b.pid,
            uuid: g0.clone(),
            busy: rate(25_000),
        },
        Probed {
            pod: "liar",
            pid: liar.pid,
            uuid: g1.clone(),
            busy: rate(15_000),
        },
        Probed {
            pod: "gpu1-b",
            pid: b1.pid,
            uuid: g1.clone(),
            busy: rate(25_000),
        },
    ];
    let sock = probe::socket(&n);
    let stray_pid = stray.to_string();
    let liar_pid = liar.pid.to_string();
    let (m, debug) = wait_checks(&t, "every probed tenant's figures", LIMIT, |m, _| {
        let mut c: Vec<(String, Check)> = probed.iter().flat_map(|p| p.checks(ns, m)).collect();
        c.push(container_check(m, ns, "ts-a", &g0, rate(30_000)));
        c.push(container_check(m, ns, "ts-b", &g0, rate(25_000)));
        c.push(container_check(m, ns, "liar", &g1, rate(15_000)));
        c.push(split_check(m, &g0));
        c.push(split_check(m, &g1));
        // The pod that claims GPU 0 has nothing there: not its PID, not its pod.
        c.push((
            "liar: nothing on GPU 0 (pid)".into(),
            nowhere(m, &[("uuid", &g0), ("pid", &liar_pid)]),
        ));
        c.push((
            "liar: nothing on GPU 0 (pod)".into(),
            nowhere(m, &[("uuid", &g0), ("pod", "liar")]),
        ));
        // A pod with no GPU: nothing of it anywhere, however long it writes.
        c.push((
            "stray: no series (pid)".into(),
            nowhere(m, &[("pid", &stray_pid)]),
        ));
        c.push((
            "stray: no series (pod)".into(),
            nowhere(m, &[("pod", "stray")]),
        ));
        c.push((
            "stray: its reports refused".into(),
            refused(m, "no-gpu-process").and_then(|v| {
                if v >= 5.0 {
                    Ok(())
                } else {
                    Err(format!("{v} refused"))
                }
            }),
        ));
        c
    });
    // GPU 0 holds exactly its two pods' three processes' probe series.
    let on_g0: Vec<String> = super::series(&m, "gpu_process_kernels_total")
        .into_iter()
        .filter(|s| s.labels.get("uuid") == Some(&g0))
        .map(|s| s.labels["pid"].clone())
        .collect();
    let mut want = vec![a.pid.to_string(), worker.to_string(), b.pid.to_string()];
    want.sort();
    let mut got = on_g0.clone();
    got.sort();
    assert_eq!(got, want, "GPU 0's probed processes");
    // Every report of the stray is counted, and nothing else's: it reports once a second from
    // its start (the kubelet's start time is whole seconds), and the tenants' reports were all
    // claimed within the grace.
    let started = stray_age(&n, ns);
    let count = refused(&m, "no-gpu-process").expect("counter");
    assert!(
        count <= started + 2.0 && count >= started - 3.0,
        "{count} reports refused, the stray has reported for about {started} s"
    );
    assert_eq!(refused(&m, "malformed"), Ok(0.0));
    assert_eq!(
        debug["probe_reports_refused"]["no-gpu-process"]
            .as_f64()
            .map(|v| v >= 5.0),
        Some(true),
        "{}",
        debug["probe_reports_refused"]
    );
    // The socket as the overlay's tessera made it: any user may connect (docs/security.md).
    let st = std::fs::symlink_metadata(&sock).expect("socket");
    assert_eq!(
        (st.mode() & 0o7777, st.uid(), st.gid()),
        (0o666, 0, 0),
        "the socket's mode and owner"
    );
    let dir = std::fs::metadata(sock.parent().expect("dir")).expect("dir");
    assert_eq!((dir.mode() & 0o7777, dir.uid()), (0o755, 0), "/run/tessera");

    restart_in_place(&n, &t, ns, &g0, a.pid, worker, b.pid);
}

/// Seconds since the stray's container started, as the kubelet reports it.
fn stray_age(n: &Node, ns: &str) -> f64 {
    let pod = n.get(ns, "stray").expect("stray");
    let started = pod
        .status
        .and_then(|s| s.container_statuses)
        .and_then(|c| c.into_iter().next())
        .and_then(|c| c.state)
        .and_then(|s| s.running)
        .and_then(|r| r.started_at)
        .map(|t| t.0);
    let started = started.expect("the stray runs");
    let now = k8s_openapi::jiff::Timestamp::now();
    (now - started).get_seconds() as f64
}

/// ts-a's process killed: the kubelet starts a new container in the pod; its old processes'
/// series go, the new ones' come, with the same pod's labels.
fn restart_in_place(n: &Node, t: &Scraped, ns: &str, g0: &str, main: u32, worker: u32, b: u32) {
    // SAFETY: kill(2) on the pid of a process this test's pod runs.
    unsafe { libc::kill(main as i32, libc::SIGKILL) };
    let pod = n.wait_pod(ns, "ts-a", "a restart in place", LIMIT, |p| {
        super::running(p, "main").is_some_and(|r| r.restarts == 1)
    });
    let again = n.track("ts-a", &super::running(&pod, "main").expect("running"));
    assert_ne!(again.pid, main);
    let worker2 = wait_child(again.pid);
    std::fs::write(n.pid_file("ts-a-worker"), format!("{worker2}\n")).expect("pid file");
    let probed = [
        Probed {
            pod: "ts-a",
            pid: again.pid,
            uuid: g0.to_owned(),
            busy: rate(15_000),
        },
        Probed {
            pod: "ts-a",
            pid: worker2,
            uuid: g0.to_owned(),
            busy: rate(15_000),
        },
        Probed {
            pod: "ts-b",
            pid: b,
            uuid: g0.to_owned(),
            busy: rate(25_000),
        },
    ];
    let (old_main, old_worker) = (main.to_string(), worker.to_string());
    wait_checks(
        t,
        "the restarted container's new processes",
        LIMIT,
        |m, _| {
            let mut c: Vec<(String, Check)> = probed.iter().flat_map(|p| p.checks(ns, m)).collect();
            c.push(container_check(m, ns, "ts-a", g0, rate(30_000)));
            c.push((
                "the old main's series are gone".into(),
                nowhere(m, &[("pid", &old_main)]),
            ));
            c.push((
                "the old worker's series are gone".into(),
                nowhere(m, &[("pid", &old_worker)]),
            ));
            c
        },
    );
}

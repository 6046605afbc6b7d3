//! Pod attribution end to end: the real binary, the fake NVML library, a fake kubelet gRPC
//! server on a temp socket, a fake API server serving real Pod JSON, and a procfs tree.

use std::time::Duration;

use crate::support::{assert_golden, value, Exporter};
use serde_json::json;
use tessera_demo::cluster::{self, PodPlan};
use tessera_demo::fakes::apiserver::{FakeApiServer, FakeCluster};
use tessera_demo::fakes::kubelet::{FakeKubelet, FakeKubeletState};
use tessera_exporter::source::podresources::DynamicDevice;

const NODE: &str = "test-node";
const GPU: [&str; 4] = [
    "GPU-10000000-0000-0000-0000-000000000000",
    "GPU-11111111-0000-0000-0000-000000000000",
    "GPU-22222222-0000-0000-0000-000000000000",
    "GPU-33333333-0000-0000-0000-000000000000",
];
const MIG_BIG: &str = "MIG-33333333-0000-0000-0000-00000000000a";
const MIG_SHARED: &str = "MIG-33333333-0000-0000-0000-00000000000b";
const MIG_DRA: &str = "MIG-33333333-0000-0000-0000-00000000000c";

fn pod(ns: &str, name: &str, resource: &str, ids: &[String], pids: &[u32]) -> PodPlan {
    PodPlan {
        owner: Some((
            "StatefulSet".into(),
            name.trim_end_matches(|c: char| c.is_ascii_digit() || c == '-')
                .into(),
        )),
        labels: [("team".to_owned(), ns.to_owned())].into(),
        ..PodPlan::single(ns, name, resource, ids, pids)
    }
}

fn plans() -> Vec<PodPlan> {
    let shared = |g: usize, n: u32| format!("{}::{n}", GPU[g]);
    vec![
        pod("ml", "train-0", "nvidia.com/gpu", &[GPU[0].into()], &[7001]),
        pod("ml", "sneaky-0", "", &[], &[7009]),
        pod(
            "team-a",
            "ts-a-0",
            "nvidia.com/gpu.shared",
            &[shared(1, 0)],
            &[7101],
        ),
        pod(
            "team-b",
            "ts-b-0",
            "nvidia.com/gpu.shared",
            &[shared(1, 1)],
            &[7102],
        ),
        pod(
            "team-c",
            "ts-c-0",
            "nvidia.com/gpu.shared",
            &[shared(1, 2)],
            &[7103],
        ),
        pod("gpu-operator", "mps-daemon-0", "", &[], &[7200]),
        pod(
            "serving",
            "mps-a-0",
            "nvidia.com/gpu.shared",
            &[shared(2, 0)],
            &[7201, 7202],
        ),
        pod(
            "serving",
            "mps-b-0",
            "nvidia.com/gpu.shared",
            &[shared(2, 1)],
            &[7203],
        ),
        pod(
            "infer",
            "mig-big-0",
            "nvidia.com/mig-3g.40gb",
            &[MIG_BIG.into()],
            &[7301],
        ),
        pod(
            "team-a",
            "mig-ts-a-0",
            "nvidia.com/mig-1g.10gb.shared",
            &[format!("{MIG_SHARED}::0")],
            &[7311],
        ),
        pod(
            "team-b",
            "mig-ts-b-0",
            "nvidia.com/mig-1g.10gb.shared",
            &[format!("{MIG_SHARED}::1")],
            &[7312],
        ),
        pod("research", "dra-0", "", &[], &[7321]),
    ]
}

fn kubelet_state(plans: &[PodPlan]) -> FakeKubeletState {
    let mut allocatable: Vec<(String, String)> = vec![("nvidia.com/gpu".into(), GPU[0].into())];
    allocatable
        .extend((0..3).map(|n| ("nvidia.com/gpu.shared".into(), format!("{}::{n}", GPU[1]))));
    allocatable
        .extend((0..2).map(|n| ("nvidia.com/gpu.shared".into(), format!("{}::{n}", GPU[2]))));
    allocatable.push(("nvidia.com/mig-3g.40gb".into(), MIG_BIG.into()));
    allocatable.extend((0..2).map(|n| {
        (
            "nvidia.com/mig-1g.10gb.shared".into(),
            format!("{MIG_SHARED}::{n}"),
        )
    }));
    let mut state = cluster::kubelet_state(plans, allocatable);
    let dra = state
        .pods
        .iter_mut()
        .find(|p| p.name == "dra-0")
        .expect("dra pod");
    dra.containers[0].dynamic.push(DynamicDevice {
        claim_name: "one-slice".into(),
        claim_namespace: "research".into(),
        driver: "gpu.nvidia.com".into(),
        pool: NODE.into(),
        device: "gpu-3-mig-1g10gb-19-5".into(),
        share_id: None,
    });
    state
}

fn api_cluster(plans: &[PodPlan]) -> FakeCluster {
    let slice = serde_json::from_value(json!({
        "apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice", "metadata": {"name": "test-node-gpus"},
        "spec": {"driver": "gpu.nvidia.com", "nodeName": NODE,
                 "pool": {"name": NODE, "generation": 1, "resourceSliceCount": 1},
                 "devices": [{"name": "gpu-3-mig-1g10gb-19-5", "attributes": {
                     "uuid": {"string": MIG_DRA}, "parentUUID": {"string": GPU[3]},
                     "profile": {"string": "1g.10gb"}, "type": {"string": "mig"}}}]}
    }))
    .expect("slice");
    FakeCluster {
        pods: plans.iter().map(|p| p.to_pod(NODE)).collect(),
        nodes: vec![cluster::node(
            NODE,
            [("nvidia.com/mig.strategy".to_owned(), "mixed".to_owned())].into(),
        )],
        slices: vec![slice],
        ..Default::default()
    }
}

fn scenario() -> std::path::PathBuf {
    crate::support::workspace().join("tests/scenarios/cluster.yaml")
}

struct Cluster {
    rt: tokio::runtime::Runtime,
    dir: tempfile::TempDir,
    socket: std::path::PathBuf,
    api: FakeApiServer,
    plans: Vec<PodPlan>,
}

impl Cluster {
    fn new() -> Self {
        let rt = crate::support::fake_cluster_runtime();
        let dir = tempfile::tempdir().unwrap();
        let plans = plans();
        let api = rt
            .block_on(FakeApiServer::start(api_cluster(&plans)))
            .unwrap();
        let socket = dir.path().join("kubelet.sock");
        Cluster {
            rt,
            dir,
            socket,
            api,
            plans,
        }
    }

    fn kubelet(&self) -> FakeKubelet {
        self.rt
            .block_on(FakeKubelet::start(&self.socket, kubelet_state(&self.plans)))
            .unwrap()
    }

    fn exporter(&self, extra: &[&str]) -> Exporter {
        let plans = self.plans.clone();
        let mut b = Exporter::builder(scenario())
            .in_fake_cluster(self.dir.path(), &self.api.url(), plans, &self.socket)
            .arg("--kube.pod-labels=team")
            .arg("--kube.dra=true");
        for a in extra {
            b = b.arg(*a);
        }
        b.start()
    }
}

fn series_value(m: &str, family: &str, needles: &[&str]) -> Option<f64> {
    m.lines()
        .find(|l| l.starts_with(family) && needles.iter().all(|n| l.contains(n)))
        .and_then(|l| l.rsplit_once(' ')?.1.parse().ok())
}

#[test]
fn every_sharing_mode_is_attributed_to_pods() {
    let c = Cluster::new();
    // The kubelet socket is missing when the exporter starts, and appears later.
    let e = c.exporter(&[]);
    let m = e.metrics();
    assert_eq!(
        value(
            &m,
            r#"tessera_collector_success{node="test-node",collector="podresources"}"#
        ),
        Some(0.0)
    );
    assert!(
        m.contains("gpu_up{"),
        "GPU metrics flow without the kubelet"
    );
    let kubelet = c.kubelet();
    e.wait_for_series("gpu_container_allocation{");
    e.wait_until("DRA and pod metadata", |e| {
        let m = e.metrics();
        m.contains(r#"claim="research/one-slice""#) && m.contains(r#"workload_kind="StatefulSet""#)
    });
    let m = e.settle();

    let mode = |gpu: &str| {
        series_value(&m, "gpu_info{", &[&format!("gpu=\"{gpu}\"")]).and(
            m.lines()
                .find(|l| l.starts_with("gpu_info{") && l.contains(&format!("gpu=\"{gpu}\"")))
                .and_then(|l| l.split("sharing_mode=\"").nth(1)?.split('"').next())
                .map(str::to_owned),
        )
    };
    assert_eq!(mode("0").as_deref(), Some("exclusive"));
    assert_eq!(mode("1").as_deref(), Some("time-slicing"));
    assert_eq!(mode("2").as_deref(), Some("mps"));
    assert_eq!(mode("3").as_deref(), Some("mig"));
    let mig_mode = |uuid: &str| {
        m.lines()
            .find(|l| l.starts_with("gpu_mig_instance_info{") && l.contains(uuid))
            .and_then(|l| l.split("sharing_mode=\"").nth(1)?.split('"').next())
            .map(str::to_owned)
    };
    assert_eq!(mig_mode(MIG_BIG).as_deref(), Some("mig"));
    assert_eq!(mig_mode(MIG_SHARED).as_deref(), Some("mig+time-slicing"));
    assert_eq!(mig_mode(MIG_DRA).as_deref(), Some("mig"));

    // Time-slicing: per-pod memory and SM share add up to the GPU's process totals, and the
    // GPU's own figures are not copied onto each tenant.
    let pods = ["ts-a-0", "ts-b-0", "ts-c-0"];
    let mem: f64 = pods
        .iter()
        .filter_map(|p| {
            series_value(
                &m,
                "gpu_container_memory_used_bytes{",
                &[&format!("pod=\"{p}\"")],
            )
        })
        .sum();
    assert_eq!(mem, 7000.0 * 1024.0 * 1024.0);
    // Three tenants run kernels time-sliced: NVML books each sample to one of them, so no
    // per-pod share is published, the whole utilization shows as unattributed, and nobody is
    // counted idle.
    for p in pods {
        assert_eq!(
            series_value(
                &m,
                "gpu_container_sm_utilization_ratio{",
                &[&format!("pod=\"{p}\"")]
            ),
            None,
            "{p}: NVML cannot split a time-sliced GPU"
        );
        assert_eq!(
            series_value(
                &m,
                "gpu_container_idle_seconds_total{",
                &[&format!("pod=\"{p}\"")]
            ),
            Some(0.0),
            "{p} is busy"
        );
    }
    assert_eq!(
        series_value(&m, "gpu_unattributed_utilization_ratio{", &["gpu=\"1\""]),
        Some(0.6)
    );
    assert!(m.contains(r#"gpu_compute_split_info{node="test-node",gpu="1""#));
    assert!(m.contains(r#"method="withheld"} 1"#));
    assert_eq!(series_value(&m, "gpu_sharers{", &["gpu=\"1\""]), Some(3.0));
    assert_eq!(series_value(&m, "gpu_replicas{", &["gpu=\"1\""]), Some(3.0));

    // MPS: two pods; the client with two processes sums them; per-client SM share is unknown.
    assert_eq!(
        series_value(&m, "gpu_container_memory_used_bytes{", &["pod=\"mps-a-0\""]),
        Some(4000.0 * 1024.0 * 1024.0)
    );
    assert!(!m
        .lines()
        .any(|l| l.starts_with("gpu_container_sm_utilization_ratio{") && l.contains("mps-a-0")));
    assert!(
        !m.contains(r#"gpu_container_unallocated_use{node="test-node",gpu="2""#),
        "the MPS daemon is not a bypass"
    );

    // Idle time accrues only for holders with no activity (the DRA pod's instance is idle).
    let idle = |pod: &str| {
        series_value(
            &m,
            "gpu_container_idle_seconds_total{",
            &[&format!("pod=\"{pod}\"")],
        )
    };
    assert!(idle("dra-0").unwrap_or(0.0) > 0.0, "{m}");
    assert_eq!(idle("train-0"), Some(0.0));
    assert_eq!(idle("sneaky-0"), None, "no allocation, no idle counter");

    // A pod running on a GPU it holds no allocation for is flagged.
    assert_eq!(
        series_value(&m, "gpu_container_unallocated_use{", &["pod=\"sneaky-0\""]),
        Some(1.0)
    );
    // The allow-listed pod label is copied; workloads are named.
    assert!(m.contains(r#"label_team="team-a""#));
    assert_golden("attribution", &m);

    // The kubelet restarts: the collector reports it, the last allocations are kept meanwhile.
    c.rt.block_on(kubelet.stop());
    e.wait_until("podresources down", |e| {
        value(
            &e.metrics(),
            r#"tessera_collector_success{node="test-node",collector="podresources"}"#,
        ) == Some(0.0)
    });
    assert!(
        e.metrics().contains(r#"pod="train-0""#),
        "last good allocations are kept while the kubelet restarts"
    );
    let _kubelet = c.kubelet();
    e.wait_until("podresources back", |e| {
        value(
            &e.metrics(),
            r#"tessera_collector_success{node="test-node",collector="podresources"}"#,
        ) == Some(1.0)
    });

    // The API server goes away: its collector fails, pod labels stay as last seen, GPUs flow.
    c.api.stop();
    e.wait_until("kube down", |e| {
        value(
            &e.metrics(),
            r#"tessera_collector_success{node="test-node",collector="kube"}"#,
        ) == Some(0.0)
    });
    let m = e.metrics();
    assert!(m.contains(r#"workload="train""#) && m.contains("gpu_up{"));
    e.stop();
}

#[test]
fn without_an_api_server_pods_are_named_from_the_kubelet() {
    let c = Cluster::new();
    let _kubelet = c.kubelet();
    let e = c.exporter(&["--kube.enabled=false"]);
    e.wait_for_series("gpu_container_memory_used_bytes{");
    // The kubelet's list joins on its own poll, a sample or more after the first container
    // series (several under emulation): wait for the pod, not for a number of samples.
    let mut m = String::new();
    e.wait_until("ts-a-0 named from the kubelet", |e| {
        m = e.metrics();
        m.contains(r#"pod="ts-a-0""#)
    });
    assert!(
        m.contains(
            r#"namespace="team-a",pod="ts-a-0",container="main",workload_kind="",workload="""#
        ),
        "{m}"
    );
    // A process whose pod the kubelet does not list keeps its pod UID.
    let sneaky = c.plans.iter().find(|p| p.name == "sneaky-0").unwrap().uid();
    assert!(
        m.contains(&format!(r#"namespace="",pod="{sneaky}""#)),
        "{m}"
    );
    assert!(!m.contains(r#"collector="kube""#));
    e.stop();
    std::thread::sleep(Duration::from_millis(10));
}

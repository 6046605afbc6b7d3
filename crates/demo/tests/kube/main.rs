//! End-to-end tests of the Kubernetes source against the fake API server.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use ::kube::Client;
use k8s_openapi::api::core::v1::{Node, Pod};
use k8s_openapi::api::resource::v1::ResourceSlice;
use serde_json::{json, Value};
use tokio::sync::watch;
use tokio::task::JoinHandle;

use tessera_exporter::source::SourceState;

use tessera_demo::fakes::apiserver::{FakeApiServer, FakeCluster};
use tessera_exporter::source::kube::*;

pub(crate) const NODE: &str = "node-a";
/// A hang guard, not a timing claim: kube-rs's default backoff grows to 30 s between retries,
/// so after a run of injected failures on a loaded machine one retry alone can take that long.
pub(crate) const DEADLINE: Duration = Duration::from_secs(90);

pub(crate) type Rx = watch::Receiver<SourceState<ClusterView>>;

fn merge(base: &mut Value, extra: Value) {
    match (base, extra) {
        (Value::Object(b), Value::Object(e)) => {
            for (k, v) in e {
                merge(b.entry(k).or_insert(Value::Null), v);
            }
        }
        (b, e) => *b = e,
    }
}

pub(crate) fn status(name: &str, id: &str) -> Value {
    json!({"name": name, "containerID": id, "image": "i", "imageID": "", "ready": true, "restartCount": 0})
}

/// A running pod with one container `main`; `extra` is merged over it.
pub(crate) fn pod(ns: &str, name: &str, uid: &str, node: &str, extra: Value) -> Pod {
    let mut v = json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"namespace": ns, "name": name, "uid": uid},
        "spec": {"nodeName": node, "containers": [{"name": "main"}]},
        "status": {"phase": "Running", "containerStatuses": [status("main", &format!("containerd://{name}-main"))]}
    });
    merge(&mut v, extra);
    serde_json::from_value(v).unwrap()
}

pub(crate) fn simple(name: &str, uid: &str) -> Pod {
    pod("default", name, uid, NODE, json!({}))
}

pub(crate) fn node(labels: Value) -> Node {
    serde_json::from_value(
        json!({"apiVersion": "v1", "kind": "Node", "metadata": {"name": NODE, "labels": labels}}),
    )
    .unwrap()
}

pub(crate) fn slice(name: &str, node: &str, devices: Value) -> ResourceSlice {
    serde_json::from_value(json!({
        "apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice", "metadata": {"name": name},
        "spec": {"driver": "gpu.nvidia.com", "nodeName": node, "devices": devices,
                 "pool": {"name": node, "generation": 1, "resourceSliceCount": 1}}
    }))
    .unwrap()
}

pub(crate) fn cfg() -> KubeConfig {
    KubeConfig {
        publish_every: Duration::from_millis(50),
        resync_every: Duration::from_millis(200),
        request_timeout: Duration::from_secs(2),
        ..KubeConfig::new(NODE)
    }
}

pub(crate) fn cluster(pods: Vec<Pod>) -> FakeCluster {
    FakeCluster {
        pods,
        nodes: vec![node(json!({}))],
        ..FakeCluster::default()
    }
}

/// Stops the source's task when the test ends.
struct Aborting(JoinHandle<()>);

impl Drop for Aborting {
    fn drop(&mut self) {
        self.0.abort();
    }
}

pub(crate) struct Running {
    pub server: FakeApiServer,
    pub rx: Rx,
    _task: Aborting,
}

pub(crate) async fn start_with(
    cluster: FakeCluster,
    cfg: KubeConfig,
    read_timeout: Option<Duration>,
) -> Running {
    let _ = tracing_subscriber::fmt()
        .with_test_writer()
        .with_env_filter("kubesrc=debug,tessera=debug")
        .try_init();
    let server = FakeApiServer::start(cluster).await.unwrap();
    let mut config = ::kube::Config::new(server.url().parse().unwrap());
    config.read_timeout = read_timeout;
    config.reset_reader_on_write = true;
    let client = Client::try_from(config).unwrap();
    let (tx, rx) = watch::channel(SourceState::default());
    let task = spawn(client, cfg, tx).await.unwrap();
    Running {
        server,
        rx,
        _task: Aborting(task),
    }
}

pub(crate) async fn start(cluster: FakeCluster, cfg: KubeConfig) -> Running {
    start_with(cluster, cfg, None).await
}

pub(crate) async fn wait_for(
    rx: &mut Rx,
    what: &str,
    pred: impl Fn(&SourceState<ClusterView>) -> bool,
) -> SourceState<ClusterView> {
    let deadline = Instant::now() + DEADLINE;
    loop {
        let state = rx.borrow_and_update().clone();
        if pred(&state) {
            return state;
        }
        let left = deadline.saturating_duration_since(Instant::now());
        match tokio::time::timeout(left, rx.changed()).await {
            Ok(Ok(())) => {}
            _ => panic!("timed out waiting for {what}; last state: {state:?}"),
        }
    }
}

pub(crate) fn names(s: &SourceState<ClusterView>) -> Vec<String> {
    s.data
        .as_ref()
        .map(|v| v.pods.iter().map(|p| p.name.clone()).collect())
        .unwrap_or_default()
}

pub(crate) fn has_pods<'a>(
    expected: &'a [&'a str],
) -> impl Fn(&SourceState<ClusterView>) -> bool + 'a {
    move |s| names(s) == expected
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn indexes_this_nodes_pods_only() {
    let hash = "0123456789abcdef0123456789abcdef";
    let pods = vec![
        pod(
            "ml",
            "train",
            "AAAAAAAA-0000-0000-0000-000000000001",
            NODE,
            json!({
            "spec": {"initContainers": [{"name": "fetch"}], "containers": [{"name": "main"}, {"name": "sidecar"}],
                     "ephemeralContainers": [{"name": "dbg"}]},
            "status": {"containerStatuses": [status("main", "containerd://c-main"), status("sidecar", "cri-o://c-side")],
                       "initContainerStatuses": [status("fetch", "containerd://c-init")],
                       "ephemeralContainerStatuses": [status("dbg", "docker://c-dbg")]}}),
        ),
        pod(
            "kube-system",
            "etcd-node-a",
            "bbbbbbbb-0000-0000-0000-000000000002",
            NODE,
            json!({
            "metadata": {"annotations": {"kubernetes.io/config.hash": hash, "kubernetes.io/config.mirror": hash,
                "kubernetes.io/config.source": "file"}}}),
        ),
        pod(
            "ml",
            "elsewhere",
            "cccccccc-0000-0000-0000-000000000003",
            "node-b",
            json!({}),
        ),
        pod(
            "ml",
            "pending",
            "dddddddd-0000-0000-0000-000000000004",
            "",
            json!({"status": {"phase": "Pending", "containerStatuses": []}}),
        ),
    ];
    let mut r = start(cluster(pods), cfg()).await;
    let s = wait_for(&mut r.rx, "pods", |s| s.data.is_some() && s.healthy).await;
    let v = s.data.unwrap();
    assert_eq!(names_of(&v), ["etcd-node-a", "train"]);
    let train = v
        .pod_by_uid("aaaaaaaa_0000_0000_0000_000000000001")
        .unwrap();
    assert_eq!(
        (train.namespace.as_str(), train.phase.as_deref()),
        ("ml", Some("Running"))
    );
    for (id, ctr) in [
        ("c-main", "main"),
        ("cri-o://c-side", "sidecar"),
        ("c-init", "fetch"),
        ("docker://c-dbg", "dbg"),
    ] {
        let (p, c) = v.pod_by_container_id(id).unwrap();
        assert_eq!((p.name.as_str(), c), ("train", ctr));
    }
    // The mirror pod is found by the hash its cgroup path carries, in either spelling.
    assert_eq!(v.pod_by_uid(hash).unwrap().name, "etcd-node-a");
    assert_eq!(
        v.pod_by_uid("01234567-89ab-cdef-0123-456789abcdef")
            .unwrap()
            .name,
        "etcd-node-a"
    );
    assert_eq!(
        v.pod_by_uid("bbbbbbbb-0000-0000-0000-000000000002")
            .unwrap()
            .name,
        "etcd-node-a"
    );
    assert!(v.pod_by_name("ml", "elsewhere").is_none());
    assert!(v
        .pod_by_uid("cccccccc-0000-0000-0000-000000000003")
        .is_none());
    let selector = format!("fieldSelector=spec.nodeName%3D{NODE}");
    assert!(r
        .server
        .request_log()
        .iter()
        .any(|l| l.starts_with("/api/v1/pods?") && l.contains(&selector)));
    assert!(s.last_success.is_some());
}

fn names_of(v: &ClusterView) -> Vec<&str> {
    v.pods.iter().map(|p| p.name.as_str()).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn live_add_delete_and_scheduling() {
    let a = simple("a", "00000000-0000-0000-0000-00000000000a");
    let mut r = start(cluster(vec![a.clone()]), cfg()).await;
    wait_for(&mut r.rx, "a", has_pods(&["a"])).await;
    let b = simple("b", "00000000-0000-0000-0000-00000000000b");
    let pending = pod(
        "default",
        "c",
        "00000000-0000-0000-0000-00000000000c",
        "",
        json!({}),
    );
    r.server.set_pods(vec![a.clone(), b.clone(), pending]);
    wait_for(&mut r.rx, "b added", has_pods(&["a", "b"])).await;
    // Bound to this node later: the filtered watch sees it arrive.
    let bound = simple("c", "00000000-0000-0000-0000-00000000000c");
    r.server.set_pods(vec![b.clone(), bound]);
    let s = wait_for(&mut r.rx, "a deleted, c bound", has_pods(&["b", "c"])).await;
    assert!(s.data.unwrap().pod_by_container_id("a-main").is_none());
    r.server.set_pods(vec![]);
    wait_for(&mut r.rx, "all gone", |s| {
        s.data.as_ref().is_some_and(|v| v.pods.is_empty())
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn owners_and_label_allow_list() {
    let owned = |name: &str, kind: &str, owner: &str, labels: Value| {
        pod(
            "w",
            name,
            &format!("00000000-0000-0000-0000-{:0>12}", name.len()),
            NODE,
            json!({"metadata": {"labels": labels,
            "ownerReferences": [{"apiVersion": "apps/v1", "kind": kind, "name": owner, "uid": "x", "controller": true}]}}),
        )
    };
    let hostile = format!("a\"b\\c\nd{}", "x".repeat(10 * 1024));
    let pods = vec![
        owned(
            "web-7f9c-abcde",
            "ReplicaSet",
            "web-7f9c",
            json!({"pod-template-hash": "7f9c", "team": "ml", "secret": "s"}),
        ),
        owned(
            "db-0",
            "StatefulSet",
            "db",
            json!({"app.kubernetes.io/name": hostile}),
        ),
        owned("agent-x", "DaemonSet", "agent", json!({})),
        owned("job-1-q", "Job", "job-1", json!({})),
        pod(
            "w",
            "bare",
            "00000000-0000-0000-0000-0000000000ff",
            NODE,
            json!({}),
        ),
    ];
    let cfg = KubeConfig {
        pod_labels: vec![
            "team".into(),
            "app.kubernetes.io/name".into(),
            "absent".into(),
        ],
        ..cfg()
    };
    let mut r = start(cluster(pods), cfg).await;
    let s = wait_for(&mut r.rx, "pods", |s| names(s).len() == 5).await;
    let v = s.data.unwrap();
    let owner = |n: &str| {
        let p = v.pod_by_name("w", n).unwrap();
        (p.owner_kind.clone(), p.owner_name.clone())
    };
    let some = |k: &str, n: &str| (Some(k.to_string()), Some(n.to_string()));
    assert_eq!(owner("web-7f9c-abcde"), some("Deployment", "web"));
    assert_eq!(owner("db-0"), some("StatefulSet", "db"));
    assert_eq!(owner("agent-x"), some("DaemonSet", "agent"));
    assert_eq!(owner("job-1-q"), some("Job", "job-1"));
    assert_eq!(owner("bare"), (None, None));
    let web = v.pod_by_name("w", "web-7f9c-abcde").unwrap();
    assert_eq!(
        web.labels,
        BTreeMap::from([("team".to_string(), "ml".to_string())])
    );
    let db = v.pod_by_name("w", "db-0").unwrap();
    assert_eq!(
        db.labels,
        BTreeMap::from([("app.kubernetes.io/name".to_string(), hostile)])
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn node_labels_follow_relabelling() {
    let mut c = cluster(vec![]);
    c.nodes = vec![node(
        json!({"nvidia.com/gpu.sharing-strategy": "time-slicing", "nvidia.com/gpu.replicas": "4",
        "nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3-SHARED"}),
    )];
    let mut r = start(c, cfg()).await;
    let s = wait_for(&mut r.rx, "time-slicing", |s| {
        s.data.as_ref().is_some_and(|v| v.node.replicas == Some(4))
    })
    .await;
    let v = s.data.unwrap();
    assert_eq!(v.node.strategy, Some(SharingStrategy::TimeSlicing));
    assert_eq!(
        v.node.product.as_deref(),
        Some("NVIDIA-H100-80GB-HBM3-SHARED")
    );
    assert_eq!(
        v.node_labels
            .get("nvidia.com/gpu.replicas")
            .map(String::as_str),
        Some("4")
    );

    r.server.set_node(node(
        json!({"nvidia.com/gpu.sharing-strategy": "mps", "nvidia.com/gpu.replicas": "2"}),
    ));
    wait_for(&mut r.rx, "mps", |s| {
        s.data
            .as_ref()
            .is_some_and(|v| v.node.strategy == Some(SharingStrategy::Mps))
    })
    .await;

    r.server.set_node(node(json!({"nvidia.com/mig.strategy": "mixed",
        "nvidia.com/mig-1g.10gb.sharing-strategy": "time-slicing", "nvidia.com/mig-1g.10gb.replicas": "3",
        "nvidia.com/mig-3g.40gb.sharing-strategy": "none"})));
    let s = wait_for(&mut r.rx, "mixed", |s| {
        s.data
            .as_ref()
            .is_some_and(|v| v.node.mig_strategy.is_some())
    })
    .await;
    let n = &s.data.unwrap().node;
    assert_eq!(n.strategy, None);
    assert_eq!(
        n.per_profile["1g.10gb"],
        (Some(SharingStrategy::TimeSlicing), Some(3))
    );
    assert_eq!(
        n.per_profile["3g.40gb"],
        (Some(SharingStrategy::None), None)
    );
}

fn gpu_slices() -> Vec<ResourceSlice> {
    vec![
        slice(
            "a-gpus",
            NODE,
            json!([
            {"name": "gpu-0", "attributes": {"uuid": {"string": "GPU-aaaa"}, "type": {"string": "gpu"}, "index": {"int": 0}}},
            {"name": "gpu-1-mig-1g10gb-19-0", "attributes": {"uuid": {"string": "MIG-bbbb"}, "parentUUID": {"string": "GPU-cccc"},
                "profile": {"string": "1g.10gb"}, "type": {"string": "mig"}}}]),
        ),
        slice(
            "b-gpus",
            "node-b",
            json!([{"name": "gpu-0", "attributes": {"uuid": {"string": "GPU-other"}}}]),
        ),
    ]
}

async fn check_dra(v1: bool) {
    let c = FakeCluster {
        slices: gpu_slices(),
        serve_v1: v1,
        ..cluster(vec![])
    };
    let mut r = start(c, KubeConfig { dra: true, ..cfg() }).await;
    let s = wait_for(&mut r.rx, "slices", |s| {
        s.healthy && s.data.as_ref().is_some_and(|v| !v.dra_devices.is_empty())
    })
    .await;
    let v = s.data.unwrap();
    assert_eq!(
        v.dra_devices.len(),
        2,
        "node-b's slice is not ours: {:?}",
        v.dra_devices
    );
    let gpu = v.dra_device("gpu.nvidia.com", NODE, "gpu-0").unwrap();
    assert_eq!(
        (gpu.uuid.as_deref(), gpu.kind.as_deref()),
        (Some("GPU-aaaa"), Some("gpu"))
    );
    let mig = v
        .dra_device("gpu.nvidia.com", NODE, "gpu-1-mig-1g10gb-19-0")
        .unwrap();
    assert_eq!(mig.uuid.as_deref(), Some("MIG-bbbb"));
    assert_eq!(mig.parent_uuid.as_deref(), Some("GPU-cccc"));
    assert_eq!(mig.profile.as_deref(), Some("1g.10gb"));
    let used_beta = r
        .server
        .request_log()
        .iter()
        .any(|l| l.starts_with("/apis/resource.k8s.io/v1beta1/"));
    assert_eq!(used_beta, !v1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dra_slices_v1() {
    check_dra(true).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dra_slices_fall_back_to_v1beta1() {
    check_dra(false).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dra_not_served_is_unhealthy_but_pods_publish() {
    let c = FakeCluster {
        slices: gpu_slices(),
        serve_v1: false,
        serve_v1beta1: false,
        ..cluster(vec![simple("a", "1")])
    };
    let mut r = start(c, KubeConfig { dra: true, ..cfg() }).await;
    let s = wait_for(&mut r.rx, "unhealthy with pods", |s| {
        !s.healthy && s.last_error.is_some() && s.data.is_some()
    })
    .await;
    assert!(
        s.last_error
            .as_deref()
            .unwrap_or("")
            .contains("resourceslices"),
        "{:?}",
        s.last_error
    );
    assert_eq!(names(&s), ["a"]);
    r.server.serve_resource_versions(true, false);
    wait_for(&mut r.rx, "recovered", |s| {
        s.healthy && s.data.as_ref().is_some_and(|v| v.dra_devices.len() == 2)
    })
    .await;
}

mod claims;
mod fault;

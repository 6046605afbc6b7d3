//! Client and poller against the fake kubelet on a temp-dir socket. Waits are
//! poll-with-deadline; nothing asserts on timing.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::watch;
use tokio::task::JoinHandle;

use tessera_exporter::source::SourceState;

use tessera_demo::fakes::kubelet::{
    serve_garbage, FakeContainer, FakeKubelet, FakeKubeletState, FakePod,
};
use tessera_exporter::source::podresources::*;

const DEADLINE: Duration = Duration::from_secs(15);
const UUID: &str = "8f2bd5c3-6a43-4b8e-9a47-3c1e2e5d7f10";

fn socket(dir: &tempfile::TempDir) -> PathBuf {
    dir.path().join("kubelet.sock")
}

fn fast_cfg(socket: &Path) -> PodResourcesConfig {
    PodResourcesConfig {
        socket: socket.to_path_buf(),
        interval: Duration::from_millis(50),
        call_timeout: Duration::from_secs(2),
        stale_after: Duration::from_secs(60),
        ..Default::default()
    }
}

fn s(v: &str) -> String {
    v.to_string()
}

fn gpu_pod(ns: &str, name: &str, ids: &[&str]) -> FakePod {
    FakePod {
        namespace: s(ns),
        name: s(name),
        containers: vec![FakeContainer {
            name: s("main"),
            devices: vec![(s("nvidia.com/gpu"), ids.iter().map(|i| s(i)).collect())],
            dynamic: vec![],
        }],
    }
}

fn dra(claim: &str, device: &str, share_id: Option<&str>) -> DynamicDevice {
    DynamicDevice {
        claim_name: s(claim),
        claim_namespace: s("team-a"),
        driver: s("gpu.nvidia.com"),
        pool: s("node-1"),
        device: s(device),
        share_id: share_id.map(s),
    }
}

fn replicas(base: &str, n: usize) -> Vec<(String, String)> {
    (0..n)
        .map(|r| (s("nvidia.com/gpu"), format!("{base}::{r}")))
        .collect()
}

type Rx = watch::Receiver<SourceState<Allocations>>;

fn start_poller(cfg: PodResourcesConfig) -> (Rx, JoinHandle<()>) {
    let (tx, rx) = watch::channel(SourceState::default());
    (rx, spawn_poller(cfg, tx))
}

async fn wait_for(
    rx: &mut Rx,
    what: &str,
    pred: impl FnMut(&SourceState<Allocations>) -> bool,
) -> SourceState<Allocations> {
    let result = tokio::time::timeout(DEADLINE, rx.wait_for(pred))
        .await
        .map(|r| r.map(|state| state.clone()));
    match result {
        Ok(Ok(state)) => state,
        Ok(Err(_)) => panic!("poller gone while waiting for: {what}"),
        Err(_) => panic!("timed out waiting for: {what}; last: {:?}", *rx.borrow()),
    }
}

fn pods_of(state: &SourceState<Allocations>) -> Vec<String> {
    state
        .data
        .as_ref()
        .map(|d| d.containers.iter().map(|c| c.pod.clone()).collect())
        .unwrap_or_default()
}

#[tokio::test]
async fn list_round_trip_keeps_every_id_form_and_dra() {
    let dir = tempfile::tempdir().expect("tempdir");
    let sock = socket(&dir);
    let ids = [
        format!("GPU-{UUID}"),
        format!("GPU-{UUID}::3"),
        format!("MIG-{UUID}"),
        format!("MIG-GPU-{UUID}/1/0"),
        s("nvidia0/vgpu2"),
    ];
    let state = FakeKubeletState {
        pods: vec![
            FakePod {
                namespace: s("team-a"),
                name: s("trainer-0"),
                containers: vec![
                    FakeContainer {
                        name: s("train"),
                        devices: vec![
                            (s("nvidia.com/gpu"), ids[..2].to_vec()),
                            (s("nvidia.com/mig-1g.10gb.shared"), ids[2..4].to_vec()),
                            (s("nvidia.com/gpu.shared"), ids[4..].to_vec()),
                        ],
                        dynamic: vec![dra("c1", "gpu-0", Some("3f9c")), dra("c2", "gpu-1", None)],
                    },
                    FakeContainer {
                        name: s("sidecar"),
                        ..Default::default()
                    },
                ],
            },
            gpu_pod("team-b", "infer", &["GPU-other"]),
        ],
        allocatable: vec![
            (s("nvidia.com/gpu"), format!("GPU-{UUID}::0")),
            (s("nvidia.com/gpu"), format!("GPU-{UUID}::1")),
        ],
        ..Default::default()
    };
    let fake = FakeKubelet::start(&sock, state).await.expect("start fake");
    let mut client = PodResourcesClient::connect(&fast_cfg(&sock))
        .await
        .expect("connect");

    let got = client.list().await.expect("List");
    assert_eq!(got.skipped, 0);
    assert_eq!(got.containers.len(), 3);
    let train = &got.containers[0];
    assert_eq!(
        (
            train.namespace.as_str(),
            train.pod.as_str(),
            train.container.as_str()
        ),
        ("team-a", "trainer-0", "train")
    );
    let flat: Vec<(&str, &str)> = train
        .devices
        .iter()
        .flat_map(|r| {
            r.device_ids
                .iter()
                .map(move |id| (r.resource_name.as_str(), id.as_str()))
        })
        .collect();
    assert_eq!(flat.len(), 5);
    for (i, id) in ids.iter().enumerate() {
        assert_eq!(flat[i].1, id, "device id form {i} must survive unchanged");
    }
    assert_eq!(flat[2].0, "nvidia.com/mig-1g.10gb.shared");
    assert_eq!(flat[4].0, "nvidia.com/gpu.shared");
    assert_eq!(
        train.dynamic,
        vec![dra("c1", "gpu-0", Some("3f9c")), dra("c2", "gpu-1", None)]
    );
    assert!(
        got.containers[1].devices.is_empty(),
        "containers without devices are kept"
    );
    assert_eq!(got.containers[2].pod, "infer");

    let allocatable = client
        .allocatable()
        .await
        .expect("allocatable")
        .expect("implemented");
    assert_eq!(allocatable.devices.len(), 2);
    assert_eq!(allocatable.devices[1].device_id, format!("GPU-{UUID}::1"));
    fake.stop().await;
}

#[tokio::test]
async fn poller_waits_for_socket_to_appear() {
    let dir = tempfile::tempdir().expect("tempdir");
    let sock = socket(&dir);
    let (mut rx, poller) = start_poller(fast_cfg(&sock));

    let down = wait_for(&mut rx, "missing socket reported", |s| {
        s.last_error.is_some()
    })
    .await;
    assert!(!down.healthy);
    assert!(down.data.is_none());
    let reason = down.last_error.unwrap_or_default();
    assert!(reason.contains("does not exist"), "{reason}");

    let fake = FakeKubelet::start(
        &sock,
        FakeKubeletState {
            pods: vec![gpu_pod("ns", "late", &["GPU-a"])],
            ..Default::default()
        },
    )
    .await
    .expect("start fake");
    let up = wait_for(&mut rx, "healthy after socket appears", |s| s.healthy).await;
    assert_eq!(pods_of(&up), vec!["late"]);
    assert!(up.last_success.is_some());
    assert!(up.last_error.is_none());
    poller.abort();
    fake.stop().await;
}

#[tokio::test]
async fn kubelet_restart_keeps_last_data_then_recovers() {
    let dir = tempfile::tempdir().expect("tempdir");
    let sock = socket(&dir);
    let before = FakeKubeletState {
        pods: vec![gpu_pod("ns", "before", &["GPU-a::0"])],
        allocatable: replicas("GPU-a", 2),
        ..Default::default()
    };
    let fake = FakeKubelet::start(&sock, before).await.expect("start fake");
    let (mut rx, poller) = start_poller(fast_cfg(&sock));
    let up = wait_for(&mut rx, "first success", |s| s.healthy).await;
    assert_eq!(up.data.map(|d| d.allocatable.len()), Some(2));

    fake.stop().await;
    let down = wait_for(&mut rx, "unhealthy while kubelet is down", |s| !s.healthy).await;
    assert_eq!(pods_of(&down), vec!["before"], "last good data is kept");
    assert!(down.last_error.is_some());
    assert!(down.last_success.is_some());

    let after = FakeKubeletState {
        pods: vec![gpu_pod("ns", "after", &["GPU-a::1"])],
        allocatable: replicas("GPU-a", 4),
        ..Default::default()
    };
    let fake = FakeKubelet::start(&sock, after)
        .await
        .expect("restart fake");
    let up = wait_for(&mut rx, "new data after restart", |s| {
        s.healthy && pods_of(s) == ["after"]
    })
    .await;
    assert!(up.last_error.is_none());
    let allocatable = up.data.map(|d| d.allocatable.len());
    assert_eq!(
        allocatable,
        Some(4),
        "allocatable is re-read after reconnect"
    );
    poller.abort();
    fake.stop().await;
}

#[tokio::test]
async fn data_is_dropped_after_stale_after() {
    let dir = tempfile::tempdir().expect("tempdir");
    let sock = socket(&dir);
    let fake = FakeKubelet::start(
        &sock,
        FakeKubeletState {
            pods: vec![gpu_pod("ns", "p", &["GPU-a"])],
            ..Default::default()
        },
    )
    .await
    .expect("start fake");
    let cfg = PodResourcesConfig {
        stale_after: Duration::from_millis(300),
        ..fast_cfg(&sock)
    };
    let (mut rx, poller) = start_poller(cfg);
    wait_for(&mut rx, "first success", |s| s.healthy).await;
    fake.stop().await;
    let gone = wait_for(&mut rx, "stale data dropped", |s| {
        !s.healthy && s.data.is_none()
    })
    .await;
    assert!(
        gone.last_success.is_some(),
        "last_success survives the data"
    );
    poller.abort();
}

/// Counts WARN events emitted from this module (the poller), not from tonic or the fake.
struct WarnCounter(Arc<AtomicUsize>);

impl<S: tracing::Subscriber> tracing_subscriber::Layer<S> for WarnCounter {
    fn on_event(&self, event: &tracing::Event<'_>, _: tracing_subscriber::layer::Context<'_, S>) {
        let meta = event.metadata();
        // The source's own warnings, not the fake kubelet's or tonic's.
        let ours = meta
            .target()
            .starts_with("tessera_exporter::source::podresources");
        if ours && *meta.level() == tracing::Level::WARN {
            self.0.fetch_add(1, Ordering::SeqCst);
        }
    }
}

// current_thread (the default): the poller runs on this thread, under the scoped subscriber.
#[tokio::test]
async fn unavailable_is_unhealthy_and_logged_once_per_change() {
    use tracing_subscriber::layer::SubscriberExt as _;
    let warns = Arc::new(AtomicUsize::new(0));
    let subscriber = tracing_subscriber::registry().with(WarnCounter(Arc::clone(&warns)));
    let _guard = tracing::subscriber::set_default(subscriber);

    let dir = tempfile::tempdir().expect("tempdir");
    let sock = socket(&dir);
    let failing = FakeKubeletState {
        fail_with: Some(tonic::Code::Unavailable),
        ..Default::default()
    };
    let fake = FakeKubelet::start(&sock, failing.clone())
        .await
        .expect("start fake");
    let (mut rx, poller) = start_poller(fast_cfg(&sock));

    let down = wait_for(&mut rx, "unhealthy", |s| {
        !s.healthy && s.last_error.is_some()
    })
    .await;
    let reason = down.last_error.unwrap_or_default();
    assert!(reason.contains("Unavailable"), "{reason}");
    let seen = fake.list_calls();
    let deadline = tokio::time::Instant::now() + DEADLINE;
    while fake.list_calls() < seen + 5 {
        assert!(
            tokio::time::Instant::now() < deadline,
            "poller stopped retrying"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(
        warns.load(Ordering::SeqCst),
        1,
        "one warning for one state change"
    );

    fake.set_state(FakeKubeletState::default());
    wait_for(&mut rx, "recovered", |s| s.healthy).await;
    fake.set_state(failing);
    wait_for(&mut rx, "failing again", |s| !s.healthy).await;
    assert_eq!(warns.load(Ordering::SeqCst), 2);
    poller.abort();
    fake.stop().await;
}

#[tokio::test]
async fn garbage_peer_is_an_error_not_a_panic() {
    let dir = tempfile::tempdir().expect("tempdir");
    let sock = socket(&dir);
    let garbage = serve_garbage(&sock).await.expect("garbage server");
    let cfg = PodResourcesConfig {
        call_timeout: Duration::from_millis(500),
        ..fast_cfg(&sock)
    };
    let result = match PodResourcesClient::connect(&cfg).await {
        Ok(mut client) => client.list().await.map(|_| ()),
        Err(err) => Err(err),
    };
    let err = result.expect_err("junk is not a pod-resources answer");
    assert!(!err.to_string().contains('\n'));

    let (mut rx, poller) = start_poller(cfg);
    let down = wait_for(&mut rx, "unhealthy on junk", |s| s.last_error.is_some()).await;
    assert!(!down.healthy);
    assert!(!poller.is_finished(), "poller survives junk");
    poller.abort();
    garbage.abort();
}

#[tokio::test]
async fn allocatable_unimplemented_is_still_healthy() {
    let dir = tempfile::tempdir().expect("tempdir");
    let sock = socket(&dir);
    let fake = FakeKubelet::start(
        &sock,
        FakeKubeletState {
            pods: vec![gpu_pod("ns", "p", &["GPU-a"])],
            allocatable: vec![(s("nvidia.com/gpu"), s("GPU-a"))],
            get_allocatable_unimplemented: true,
            ..Default::default()
        },
    )
    .await
    .expect("start fake");
    let (mut rx, poller) = start_poller(fast_cfg(&sock));
    let up = wait_for(&mut rx, "healthy", |s| s.healthy).await;
    let data = up.data.expect("data");
    assert!(data.allocatable.is_empty());
    assert_eq!(data.containers.len(), 1);
    poller.abort();
    fake.stop().await;
}

#[tokio::test]
async fn poller_reports_allocatable_replicas() {
    let dir = tempfile::tempdir().expect("tempdir");
    let sock = socket(&dir);
    let allocatable = (0..4)
        .map(|r| (s("nvidia.com/gpu"), format!("GPU-{UUID}::{r}")))
        .collect();
    let fake = FakeKubelet::start(
        &sock,
        FakeKubeletState {
            pods: vec![gpu_pod("ns", "p", &[&format!("GPU-{UUID}::2")])],
            allocatable,
            ..Default::default()
        },
    )
    .await
    .expect("start fake");
    let (mut rx, poller) = start_poller(fast_cfg(&sock));
    let up = wait_for(&mut rx, "healthy", |s| s.healthy).await;
    let data = up.data.expect("data");
    assert_eq!(data.allocatable.len(), 4);
    assert!(data
        .allocatable
        .iter()
        .all(|d| d.resource_name == "nvidia.com/gpu"));
    poller.abort();
    fake.stop().await;
}

#[test]
fn validate_rejects_fast_polling_and_accepts_defaults() {
    assert!(PodResourcesConfig::default().validate().is_empty());
    let bad = PodResourcesConfig {
        interval: Duration::from_millis(200),
        max_message_size: 1024,
        ..Default::default()
    };
    assert_eq!(bad.validate().len(), 2);
}

#[tokio::test]
async fn a_restarted_kubelet_listing_no_pod_yet_is_not_believed_within_the_grace() {
    let dir = tempfile::tempdir().expect("tempdir");
    let sock = socket(&dir);
    let running = FakeKubeletState {
        pods: vec![gpu_pod("ns", "running", &["GPU-a"])],
        ..Default::default()
    };
    let fake = FakeKubelet::start(&sock, running.clone())
        .await
        .expect("start fake");
    let cfg = PodResourcesConfig {
        empty_grace: Duration::from_millis(800),
        ..fast_cfg(&sock)
    };
    let (mut rx, poller) = start_poller(cfg);
    wait_for(&mut rx, "first success", |s| s.healthy).await;

    // Restarted: a new socket, and no pod listed until the kubelet has read them back.
    fake.stop().await;
    let fake = FakeKubelet::start(&sock, FakeKubeletState::default())
        .await
        .expect("restart fake");
    let held = wait_for(&mut rx, "the empty answer held back", |s| {
        s.last_error
            .as_deref()
            .is_some_and(|e| e.contains("restarted and lists no pod yet"))
    })
    .await;
    assert_eq!(pods_of(&held), ["running"], "the last good answer stands");
    assert!(!held.healthy);
    // Every pod really gone: believed once the grace has passed.
    let taken = wait_for(&mut rx, "the empty answer taken", |s| s.healthy).await;
    assert!(pods_of(&taken).is_empty());

    // Without a restart, no pod listed is believed at once (the last pod was deleted).
    fake.set_state(running);
    wait_for(&mut rx, "pods again", |s| {
        s.healthy && pods_of(s) == ["running"]
    })
    .await;
    let mut seen_unhealthy = false;
    fake.set_state(FakeKubeletState::default());
    wait_for(&mut rx, "the deletion believed", |s| {
        seen_unhealthy |= !s.healthy;
        s.healthy && pods_of(s).is_empty()
    })
    .await;
    assert!(!seen_unhealthy, "nothing held back without a restart");
    poller.abort();
    fake.stop().await;
}

use super::*;
use hyper_util::rt::TokioIo;
use tessera_exporter::source::podresources::{PodResourcesClient, PodResourcesConfig};
use tonic::transport::{Endpoint, Uri};

fn pod(name: &str) -> FakePod {
    FakePod {
        namespace: "ns".into(),
        name: name.into(),
        containers: vec![FakeContainer {
            name: "c".into(),
            devices: vec![("nvidia.com/gpu".into(), vec!["GPU-a".into()])],
            dynamic: vec![],
        }],
    }
}

fn cfg(socket: &Path) -> PodResourcesConfig {
    PodResourcesConfig {
        socket: socket.to_path_buf(),
        ..Default::default()
    }
}

async fn raw_client(
    socket: &Path,
) -> pb::pod_resources_lister_client::PodResourcesListerClient<tonic::transport::Channel> {
    let path = socket.to_path_buf();
    let channel = Endpoint::from_static("http://fake.invalid")
        .connect_with_connector(tower::service_fn(move |_: Uri| {
            let path = path.clone();
            async move { UnixStream::connect(path).await.map(TokioIo::new) }
        }))
        .await
        .expect("connect");
    pb::pod_resources_lister_client::PodResourcesListerClient::new(channel)
}

#[tokio::test]
async fn state_swaps_live_and_calls_are_counted() {
    let dir = tempfile::tempdir().expect("tempdir");
    let sock = dir.path().join("k.sock");
    let fake = FakeKubelet::start(
        &sock,
        FakeKubeletState {
            pods: vec![pod("one")],
            ..Default::default()
        },
    )
    .await
    .expect("start");
    let mut client = PodResourcesClient::connect(&cfg(&sock))
        .await
        .expect("connect");
    assert_eq!(client.list().await.expect("list").containers[0].pod, "one");
    fake.set_state(FakeKubeletState {
        pods: vec![pod("two"), pod("three")],
        ..Default::default()
    });
    let got = client.list().await.expect("list");
    assert_eq!(got.containers.len(), 2);
    assert_eq!(got.containers[0].pod, "two");
    assert_eq!(fake.list_calls(), 2);
    fake.stop().await;
}

#[tokio::test]
async fn get_finds_one_pod() {
    let dir = tempfile::tempdir().expect("tempdir");
    let sock = dir.path().join("k.sock");
    let fake = FakeKubelet::start(
        &sock,
        FakeKubeletState {
            pods: vec![pod("one"), pod("two")],
            ..Default::default()
        },
    )
    .await
    .expect("start");
    let mut raw = raw_client(&sock).await;
    let found = raw
        .get(pb::GetPodResourcesRequest {
            pod_name: "two".into(),
            pod_namespace: "ns".into(),
        })
        .await
        .expect("get")
        .into_inner();
    assert_eq!(found.pod_resources.map(|p| p.name).as_deref(), Some("two"));
    let missing = raw
        .get(pb::GetPodResourcesRequest {
            pod_name: "nope".into(),
            pod_namespace: "ns".into(),
        })
        .await
        .expect_err("absent pod");
    assert_eq!(missing.code(), tonic::Code::NotFound);
    fake.stop().await;
}

#[tokio::test]
async fn injected_failure_applies_to_every_rpc() {
    let dir = tempfile::tempdir().expect("tempdir");
    let sock = dir.path().join("k.sock");
    let fake = FakeKubelet::start(
        &sock,
        FakeKubeletState {
            fail_with: Some(tonic::Code::PermissionDenied),
            ..Default::default()
        },
    )
    .await
    .expect("start");
    let mut client = PodResourcesClient::connect(&cfg(&sock))
        .await
        .expect("connect");
    let err = client.list().await.expect_err("injected");
    assert_eq!(err.code(), Some(tonic::Code::PermissionDenied));
    let err = client.allocatable().await.expect_err("injected");
    assert_eq!(err.code(), Some(tonic::Code::PermissionDenied));
    fake.stop().await;
}

#[tokio::test]
async fn stop_removes_socket_and_start_again_serves() {
    let dir = tempfile::tempdir().expect("tempdir");
    let sock = dir.path().join("k.sock");
    let fake = FakeKubelet::start(&sock, FakeKubeletState::default())
        .await
        .expect("start");
    // An idle client connection must not keep `stop` from finishing.
    let mut client = PodResourcesClient::connect(&cfg(&sock))
        .await
        .expect("connect");
    client.list().await.expect("list");
    fake.stop().await;
    assert!(!sock.exists(), "stop removes the socket file");
    assert!(client.list().await.is_err());

    let fake = FakeKubelet::start(
        &sock,
        FakeKubeletState {
            pods: vec![pod("back")],
            ..Default::default()
        },
    )
    .await
    .expect("restart");
    let mut client = PodResourcesClient::connect(&cfg(&sock))
        .await
        .expect("reconnect");
    assert_eq!(client.list().await.expect("list").containers[0].pod, "back");
    fake.stop().await;
}

#[tokio::test]
async fn start_replaces_a_stale_socket_file() {
    let dir = tempfile::tempdir().expect("tempdir");
    let sock = dir.path().join("k.sock");
    drop(std::os::unix::net::UnixListener::bind(&sock).expect("bind"));
    let fake = FakeKubelet::start(&sock, FakeKubeletState::default())
        .await
        .expect("start over stale file");
    fake.stop().await;
}

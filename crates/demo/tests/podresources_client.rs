//! The pod-resources client against the fake kubelet: answers at the edge of its limits.

use std::path::Path;
use std::time::Duration;

use prost::Message as _;
use tessera_demo::fakes::kubelet::{
    list_response, FakeContainer, FakeKubelet, FakeKubeletState, FakePod,
};
use tessera_exporter::source::podresources::*;

fn cfg_for(socket: &Path) -> PodResourcesConfig {
    PodResourcesConfig {
        socket: socket.to_path_buf(),
        ..Default::default()
    }
}

fn huge_state(containers: usize) -> FakeKubeletState {
    let ids: Vec<String> = (0..3)
        .map(|r| format!("GPU-8f2bd5c3-6a43-4b8e-9a47-3c1e2e5d7f10::{r}"))
        .collect();
    let pods = (0..containers)
        .map(|i| FakePod {
            namespace: format!("namespace-{}", i % 50),
            name: format!("batch-job-with-a-long-name-{i:06}"),
            containers: vec![FakeContainer {
                name: "worker".into(),
                devices: vec![("nvidia.com/gpu.shared".into(), ids.clone())],
                dynamic: vec![],
            }],
        })
        .collect();
    FakeKubeletState {
        pods,
        ..Default::default()
    }
}

#[tokio::test]
async fn huge_list_decodes_with_raised_limit() {
    let dir = tempfile::tempdir().expect("tempdir");
    let sock = dir.path().join("kubelet.sock");
    let state = huge_state(20_000);
    let encoded = list_response(&state).encoded_len();
    assert!(
        encoded > 4 * 1024 * 1024,
        "fixture must exceed tonic's default: {encoded}"
    );
    let fake = FakeKubelet::start(&sock, state).await.expect("start fake");

    let mut client = PodResourcesClient::connect(&cfg_for(&sock))
        .await
        .expect("connect");
    let got = client.list().await.expect("List within 16 MiB");
    assert_eq!(got.containers.len(), 20_000);
    assert_eq!(got.containers[19_999].devices[0].device_ids.len(), 3);

    // Proves the raised limit is what makes it work.
    let small = PodResourcesConfig {
        max_message_size: 4 * 1024 * 1024,
        ..cfg_for(&sock)
    };
    let mut client = PodResourcesClient::connect(&small).await.expect("connect");
    let err = client.list().await.expect_err("over 4 MiB");
    assert_eq!(err.code(), Some(tonic::Code::OutOfRange), "{err}");
    fake.stop().await;
}

#[tokio::test]
async fn slow_kubelet_times_out() {
    let dir = tempfile::tempdir().expect("tempdir");
    let sock = dir.path().join("kubelet.sock");
    let stalled = FakeKubeletState {
        delay: Some(Duration::from_secs(30)),
        ..Default::default()
    };
    let fake = FakeKubelet::start(&sock, stalled)
        .await
        .expect("start fake");
    let cfg = PodResourcesConfig {
        call_timeout: Duration::from_millis(200),
        ..cfg_for(&sock)
    };
    let mut client = PodResourcesClient::connect(&cfg).await.expect("connect");
    let err = client.list().await.expect_err("stalled");
    assert!(
        matches!(err, PodResourcesError::Timeout { rpc: "List", .. }),
        "{err}"
    );
    fake.stop().await;
}

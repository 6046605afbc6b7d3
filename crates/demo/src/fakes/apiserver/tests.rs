//! The fake's own protocol details that the Kubernetes source's tests do not reach.

use ::kube::api::{Api, ListParams};
use ::kube::Client;
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::api::resource::v1beta1;
use serde_json::json;

use super::*;

fn pod(name: &str, node: &str) -> Pod {
    serde_json::from_value(
        json!({"metadata": {"namespace": "ns", "name": name, "uid": name},
        "spec": {"nodeName": node, "containers": [{"name": "c"}]}}),
    )
    .unwrap()
}

async fn client(server: &FakeApiServer) -> Client {
    Client::try_from(::kube::Config::new(server.url().parse().unwrap())).unwrap()
}

#[tokio::test]
async fn paginates_and_expires_continue_tokens() {
    let pods = ["a", "b", "c"].map(|n| pod(n, "n1")).to_vec();
    let server = FakeApiServer::start(FakeCluster {
        pods,
        ..FakeCluster::default()
    })
    .await
    .unwrap();
    let api: Api<Pod> = Api::all(client(&server).await);
    let first = api.list(&ListParams::default().limit(2)).await.unwrap();
    assert_eq!(first.items.len(), 2);
    let token = first.metadata.continue_.clone().unwrap();
    let rest = api
        .list(&ListParams::default().limit(2).continue_token(&token))
        .await
        .unwrap();
    assert_eq!(
        rest.items
            .iter()
            .map(|p| p.metadata.name.clone().unwrap())
            .collect::<Vec<_>>(),
        ["c"]
    );
    assert!(rest.metadata.continue_.is_none());
    server.expire_watches();
    let err = api
        .list(&ListParams::default().limit(2).continue_token(&token))
        .await
        .unwrap_err();
    assert!(matches!(err, ::kube::Error::Api(s) if s.code == 410));
}

#[tokio::test]
async fn field_selectors_are_checked_and_honoured() {
    let pods = vec![pod("a", "n1"), pod("b", "n2")];
    let server = FakeApiServer::start(FakeCluster {
        pods,
        ..FakeCluster::default()
    })
    .await
    .unwrap();
    let api: Api<Pod> = Api::all(client(&server).await);
    let not_n1 = api
        .list(&ListParams::default().fields("spec.nodeName!=n1"))
        .await
        .unwrap();
    assert_eq!(not_n1.items.len(), 1);
    assert_eq!(not_n1.items[0].metadata.name.as_deref(), Some("b"));
    let err = api
        .list(&ListParams::default().fields("spec.hostname=x"))
        .await
        .unwrap_err();
    assert!(matches!(err, ::kube::Error::Api(s) if s.code == 400));
    // 500, not 503: kube-rs retries 429/503/504 by itself.
    server.fail_next(1, 500);
    assert!(api.list(&ListParams::default()).await.is_err());
    assert_eq!(
        api.list(&ListParams::default()).await.unwrap().items.len(),
        2
    );
    assert!(server.requests() >= 4);
}

#[tokio::test]
async fn serves_v1beta1_device_shape() {
    let slice = serde_json::from_value(json!({"metadata": {"name": "s"},
        "spec": {"driver": "d", "nodeName": "n1", "pool": {"name": "n1", "generation": 1, "resourceSliceCount": 1},
                 "devices": [{"name": "gpu-0", "attributes": {"uuid": {"string": "GPU-1"}}}]}}))
    .unwrap();
    let server = FakeApiServer::start(FakeCluster {
        slices: vec![slice],
        ..FakeCluster::default()
    })
    .await
    .unwrap();
    let api: Api<v1beta1::ResourceSlice> = Api::all(client(&server).await);
    let list = api.list(&ListParams::default()).await.unwrap();
    let dev = &list.items[0].spec.devices.as_ref().unwrap()[0];
    let uuid = dev
        .basic
        .as_ref()
        .and_then(|b| b.attributes.as_ref())
        .and_then(|a| a["uuid"].string.clone());
    assert_eq!(uuid.as_deref(), Some("GPU-1"));
    server.serve_resource_versions(true, false);
    assert!(
        matches!(api.list(&ListParams::default()).await.unwrap_err(), ::kube::Error::Api(s) if s.code == 404)
    );
}

//! Fault tests of the Kubernetes source: API errors, expired watches, a slow and a stopped
//! API server, bad configuration.

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::watch;

use tessera_exporter::source::SourceState;

use crate::{cfg, cluster, names, simple, start, start_with, wait_for};
use tessera_demo::fakes::apiserver::Expiry;
use tessera_exporter::source::kube::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn server_errors_back_off_and_recover() {
    let server_pods = vec![simple("a", "1")];
    let mut r = start_with(cluster(server_pods), cfg(), None).await;
    r.server.fail_next(u32::MAX, 500);
    // The first list may have raced the failure switch; force a fresh list either way.
    r.server.expire_watches();
    let s = wait_for(&mut r.rx, "unhealthy", |s| {
        !s.healthy && s.last_error.is_some()
    })
    .await;
    assert!(
        s.last_error
            .as_deref()
            .unwrap_or("")
            .contains("injected failure"),
        "{:?}",
        s.last_error
    );
    r.server.fail_next(0, 500);
    let s = wait_for(&mut r.rx, "healthy again", |s| {
        s.healthy && names(s) == ["a"]
    })
    .await;
    assert!(s.last_success.is_some());

    // Failing once data is published keeps that data.
    r.server.fail_next(u32::MAX, 500);
    r.server.expire_watches();
    let s = wait_for(&mut r.rx, "unhealthy again", |s| !s.healthy).await;
    assert_eq!(names(&s), ["a"]);
    r.server.set_pods(vec![simple("a", "1"), simple("b", "2")]);
    r.server.fail_next(0, 500);
    wait_for(&mut r.rx, "recovered with b", |s| {
        s.healthy && names(s) == ["a", "b"]
    })
    .await;
}

/// Expiry in both forms: the in-stream ERROR event (kube-rs relists) and an HTTP 410 on the
/// re-watch (kube-rs would retry the same version forever; the source restarts the reflector).
async fn check_expiry(how: Expiry) {
    let (a, b, c) = (simple("a", "1"), simple("b", "2"), simple("c", "3"));
    let mut r = start(cluster(vec![a.clone(), b]), cfg()).await;
    wait_for(&mut r.rx, "a, b", |s| s.healthy && names(s) == ["a", "b"]).await;
    let before = r.server.request_log().len();
    r.server.expire_watches_with(how);
    r.server.set_pods(vec![a, c]);
    let s = wait_for(&mut r.rx, "a, c after relist", |s| names(s) == ["a", "c"]).await;
    let uids: std::collections::BTreeSet<&str> = s
        .data
        .as_ref()
        .unwrap()
        .pods
        .iter()
        .map(|p| p.uid.as_str())
        .collect();
    assert_eq!(uids.len(), 2, "no duplicates");
    let relisted = r.server.request_log()[before..]
        .iter()
        .any(|l| l.starts_with("/api/v1/pods?") && !l.contains("watch=true"));
    assert!(relisted, "a fresh list followed the expiry");
    wait_for(&mut r.rx, "healthy", |s| s.healthy).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn expired_watch_event_relists() {
    check_expiry(Expiry::ErrorEvent).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn expired_watch_http_410_relists() {
    check_expiry(Expiry::HttpGone).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn slow_server_times_out_and_recovers() {
    let cfg = KubeConfig {
        request_timeout: Duration::from_millis(500),
        ..cfg()
    };
    let mut r = start_with(
        cluster(vec![simple("a", "1")]),
        cfg,
        Some(Duration::from_secs(1)),
    )
    .await;
    wait_for(&mut r.rx, "a", |s| s.healthy && names(s) == ["a"]).await;
    r.server.delay(Duration::from_secs(3));
    r.server.expire_watches();
    let s = wait_for(&mut r.rx, "unhealthy", |s| !s.healthy).await;
    assert_eq!(names(&s), ["a"], "last data kept");
    r.server.delay(Duration::ZERO);
    wait_for(&mut r.rx, "healthy", |s| s.healthy).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stopped_server_keeps_last_data() {
    let mut r = start(cluster(vec![simple("a", "1")]), cfg()).await;
    let up = wait_for(&mut r.rx, "a", |s| s.healthy && names(s) == ["a"]).await;
    r.server.stop();
    let s = wait_for(&mut r.rx, "unhealthy", |s| !s.healthy).await;
    assert!(
        Arc::ptr_eq(s.data.as_ref().unwrap(), up.data.as_ref().unwrap()),
        "same data, not rebuilt"
    );
    assert!(s.last_error.is_some());
    assert!(s.last_success.is_some());
}

#[tokio::test]
async fn rejects_bad_config() {
    let client = client_for_url("http://127.0.0.1:9").await.unwrap();
    for bad in [
        KubeConfig::new(""),
        KubeConfig::new("a,b"),
        KubeConfig {
            publish_every: Duration::ZERO,
            ..KubeConfig::new("n")
        },
    ] {
        let (tx, _rx) = watch::channel(SourceState::default());
        assert!(matches!(
            spawn(client.clone(), bad, tx).await,
            Err(KubeSourceError::InvalidConfig(_))
        ));
    }
    assert!(matches!(
        client_for_url("not a url").await,
        Err(KubeSourceError::Url { .. })
    ));
}

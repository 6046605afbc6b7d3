use std::path::Path;

use super::*;

fn cfg_for(socket: &Path) -> PodResourcesConfig {
    PodResourcesConfig {
        socket: socket.to_path_buf(),
        ..Default::default()
    }
}

#[test]
fn reasons_are_one_bounded_line() {
    let s = truncate(sanitize(&format!("a\nb{}", "é".repeat(400))));
    assert!(!s.contains('\n'));
    assert!(s.len() <= MAX_REASON_LEN + '…'.len_utf8());
}

#[tokio::test]
async fn missing_socket_is_classified() {
    let dir = tempfile::tempdir().expect("tempdir");
    let cfg = cfg_for(&dir.path().join("absent.sock"));
    let err = PodResourcesClient::connect(&cfg)
        .await
        .expect_err("no socket");
    assert!(
        matches!(err, PodResourcesError::SocketMissing { .. }),
        "{err}"
    );
}

#[tokio::test]
async fn refused_connection_is_a_connect_error() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("dead.sock");
    // A socket file nobody listens on: what a crashed kubelet leaves behind.
    drop(std::os::unix::net::UnixListener::bind(&path).expect("bind"));
    let cfg = cfg_for(&path);
    let err = PodResourcesClient::connect(&cfg)
        .await
        .expect_err("refused");
    assert!(matches!(err, PodResourcesError::Connect { .. }), "{err}");
    assert!(!err.to_string().contains('\n'));
}

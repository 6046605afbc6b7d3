//! gRPC client for the kubelet pod-resources socket.

use std::future::Future;
use std::path::{Path, PathBuf};
use std::time::Duration;

use hyper_util::rt::TokioIo;
use tokio::net::UnixStream;
use tonic::transport::{Channel, Endpoint, Uri};

use super::convert::{self, Allocatable, Allocations};
use super::pb::pod_resources_lister_client::PodResourcesListerClient;
use super::pb::{AllocatableResourcesRequest, ListPodResourcesRequest};
use super::PodResourcesConfig;

/// Error messages from the far side are cut here so one bad answer cannot flood logs or
/// the `last_error` shown on `/debug` pages.
const MAX_REASON_LEN: usize = 300;

#[derive(Debug, thiserror::Error)]
pub enum PodResourcesError {
    #[error("pod-resources socket {} does not exist (kubelet down or socket dir not mounted)", path.display())]
    SocketMissing { path: PathBuf },
    #[error("permission denied on pod-resources socket {} (the exporter must run as root)", path.display())]
    PermissionDenied { path: PathBuf },
    #[error("connecting to pod-resources socket {}: {reason}", path.display())]
    Connect { path: PathBuf, reason: String },
    #[error("pod-resources {rpc} timed out after {timeout:?}")]
    Timeout {
        rpc: &'static str,
        timeout: Duration,
    },
    #[error("pod-resources {rpc} failed: {code:?}: {reason}")]
    Rpc {
        rpc: &'static str,
        code: tonic::Code,
        reason: String,
    },
    #[error("the kubelet restarted and lists no pod yet (it answers before it has read its pods back); keeping the last answer for up to {grace:?}")]
    NoPodsYet { grace: Duration },
}

impl PodResourcesError {
    /// The gRPC status code, for RPC failures.
    pub fn code(&self) -> Option<tonic::Code> {
        match self {
            Self::Rpc { code, .. } => Some(*code),
            _ => None,
        }
    }
}

/// A connected client. Cheap to keep; drop it after an error and connect again, so that a
/// restarted kubelet is picked up with a fresh connection.
#[derive(Debug, Clone)]
pub struct PodResourcesClient {
    inner: PodResourcesListerClient<Channel>,
    call_timeout: Duration,
    socket: PathBuf,
}

impl PodResourcesClient {
    /// Connects eagerly, so a missing socket or a refused connection shows up here rather
    /// than on the first call.
    pub async fn connect(cfg: &PodResourcesConfig) -> Result<Self, PodResourcesError> {
        let path = cfg.socket.clone();
        let connector = tower::service_fn(move |_: Uri| {
            let path = path.clone();
            async move { UnixStream::connect(path).await.map(TokioIo::new) }
        });
        // The URI is never resolved: the connector above ignores it and dials the socket.
        let endpoint = Endpoint::from_static("http://kubelet.pod-resources.invalid");
        let channel = with_timeout("connect", cfg.call_timeout, async {
            endpoint
                .connect_with_connector(connector)
                .await
                .map_err(|e| classify_connect_error(&cfg.socket, &e))
        })
        .await?;
        let inner =
            PodResourcesListerClient::new(channel).max_decoding_message_size(cfg.max_message_size);
        Ok(Self {
            inner,
            call_timeout: cfg.call_timeout,
            socket: cfg.socket.clone(),
        })
    }

    /// `List`: every container on the node with its devices. `allocatable` is left empty.
    pub async fn list(&mut self) -> Result<Allocations, PodResourcesError> {
        let resp = with_timeout("List", self.call_timeout, async {
            self.inner
                .list(ListPodResourcesRequest {})
                .await
                .map_err(|s| rpc_error(&self.socket, "List", &s))
        })
        .await?;
        Ok(convert::allocations_from_list(resp.into_inner()))
    }

    /// `GetAllocatableResources`; `Ok(None)` when the kubelet does not implement it
    /// (older than 1.21 or the feature is off), which is not an error for tessera.
    pub async fn allocatable(&mut self) -> Result<Option<Allocatable>, PodResourcesError> {
        let result = with_timeout("GetAllocatableResources", self.call_timeout, async {
            match self
                .inner
                .get_allocatable_resources(AllocatableResourcesRequest {})
                .await
            {
                Ok(resp) => Ok(Some(resp.into_inner())),
                Err(s) if s.code() == tonic::Code::Unimplemented => Ok(None),
                Err(s) => Err(rpc_error(&self.socket, "GetAllocatableResources", &s)),
            }
        })
        .await?;
        Ok(result.map(convert::allocatable_from))
    }
}

async fn with_timeout<T>(
    rpc: &'static str,
    timeout: Duration,
    fut: impl Future<Output = Result<T, PodResourcesError>>,
) -> Result<T, PodResourcesError> {
    tokio::time::timeout(timeout, fut)
        .await
        .unwrap_or(Err(PodResourcesError::Timeout { rpc, timeout }))
}

fn classify_connect_error(path: &Path, err: &tonic::transport::Error) -> PodResourcesError {
    classify_io(path, err).unwrap_or_else(|| PodResourcesError::Connect {
        path: path.into(),
        reason: one_line(err),
    })
}

fn rpc_error(path: &Path, rpc: &'static str, status: &tonic::Status) -> PodResourcesError {
    // tonic reconnects lazily, so a socket that vanished between calls surfaces here.
    if let Some(err) = classify_io(path, status) {
        return err;
    }
    PodResourcesError::Rpc {
        rpc,
        code: status.code(),
        reason: join_chain(
            status.message().to_string(),
            std::error::Error::source(status),
        ),
    }
}

/// The errors an operator can act on (socket absent, wrong permissions) get their own
/// variants; they are found as an `io::Error` somewhere down the source chain.
fn classify_io(path: &Path, err: &(dyn std::error::Error + 'static)) -> Option<PodResourcesError> {
    let mut source = Some(err);
    while let Some(e) = source {
        if let Some(io) = e.downcast_ref::<std::io::Error>() {
            match io.kind() {
                std::io::ErrorKind::NotFound => {
                    return Some(PodResourcesError::SocketMissing { path: path.into() })
                }
                std::io::ErrorKind::PermissionDenied => {
                    return Some(PodResourcesError::PermissionDenied { path: path.into() })
                }
                _ => {}
            }
        }
        source = e.source();
    }
    None
}

/// Joins an error and its sources into one bounded line.
pub(crate) fn one_line(err: &(dyn std::error::Error + 'static)) -> String {
    join_chain(err.to_string(), err.source())
}

/// Appends each source not already spelled out: hyper and tonic wrap errors whose Display
/// repeats their source, or is a bare "transport error".
fn join_chain(mut out: String, mut source: Option<&(dyn std::error::Error + 'static)>) -> String {
    while let Some(e) = source {
        let s = e.to_string();
        if !out.contains(&s) {
            if !out.is_empty() {
                out.push_str(": ");
            }
            out.push_str(&s);
        }
        source = e.source();
    }
    truncate(sanitize(&out))
}

fn sanitize(s: &str) -> String {
    s.chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .collect()
}

fn truncate(mut s: String) -> String {
    if s.len() > MAX_REASON_LEN {
        let mut cut = MAX_REASON_LEN;
        while !s.is_char_boundary(cut) {
            cut -= 1;
        }
        s.truncate(cut);
        s.push('…');
    }
    s
}

#[cfg(test)]
#[path = "client_tests.rs"]
mod tests;

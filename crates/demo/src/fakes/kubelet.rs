//! A fake kubelet: a real gRPC pod-resources server on a UNIX socket, for end-to-end tests
//! and the `--demo` node. Its answer can be swapped live and made to fail or stall.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::net::{UnixListener, UnixStream};
use tokio::sync::oneshot;
use tokio::task::JoinHandle;
use tonic::{Request, Response, Status};
use tracing::debug;

use crate::fakes::pb::{self, pod_resources_lister_server as server};
use tessera_exporter::source::podresources::DynamicDevice;

/// How long `stop` waits for open connections to finish before cutting them.
const STOP_GRACE: Duration = Duration::from_secs(2);

/// What the fake answers. Swap it with [`FakeKubelet::set_state`].
#[derive(Debug, Clone, Default)]
pub struct FakeKubeletState {
    pub pods: Vec<FakePod>,
    /// (resource name, device ID) pairs for `GetAllocatableResources`.
    pub allocatable: Vec<(String, String)>,
    /// Every RPC fails with this code.
    pub fail_with: Option<tonic::Code>,
    /// Every RPC waits this long before answering.
    pub delay: Option<Duration>,
    /// `GetAllocatableResources` answers UNIMPLEMENTED, like kubelets before 1.21.
    pub get_allocatable_unimplemented: bool,
}

#[derive(Debug, Clone, Default)]
pub struct FakePod {
    pub namespace: String,
    pub name: String,
    pub containers: Vec<FakeContainer>,
}

#[derive(Debug, Clone, Default)]
pub struct FakeContainer {
    pub name: String,
    /// (resource name, device IDs)
    pub devices: Vec<(String, Vec<String>)>,
    pub dynamic: Vec<DynamicDevice>,
}

#[derive(Debug, Default)]
struct Shared {
    state: Mutex<Arc<FakeKubeletState>>,
    list_calls: AtomicU64,
}

impl Shared {
    fn state(&self) -> Arc<FakeKubeletState> {
        // A panic while holding this lock cannot leave the Arc half-written.
        Arc::clone(&self.state.lock().unwrap_or_else(|e| e.into_inner()))
    }
}

#[derive(Debug)]
pub struct FakeKubelet {
    socket: PathBuf,
    shared: Arc<Shared>,
    shutdown: oneshot::Sender<()>,
    task: JoinHandle<()>,
}

impl FakeKubelet {
    /// Binds `socket` (replacing a stale file, as the kubelet does) and serves until `stop`.
    /// The socket exists when this returns.
    pub async fn start(socket: &Path, state: FakeKubeletState) -> std::io::Result<FakeKubelet> {
        let listener = bind_fresh(socket).await?;
        let shared = Arc::new(Shared {
            state: Mutex::new(Arc::new(state)),
            list_calls: AtomicU64::new(0),
        });
        let service = server::PodResourcesListerServer::new(Lister {
            shared: Arc::clone(&shared),
        });
        let (shutdown, signal) = oneshot::channel::<()>();
        let incoming = futures::stream::unfold(listener, |listener| async move {
            let conn = listener.accept().await.map(|(stream, _)| stream);
            Some((conn, listener))
        });
        let task = tokio::spawn(async move {
            let signal = async {
                // A dropped sender means the fake was dropped without `stop`: shut down too.
                let _ = signal.await;
            };
            if let Err(err) = tonic::transport::Server::builder()
                .serve_with_incoming_shutdown(service, incoming, signal)
                .await
            {
                debug!(error = %err, "fake kubelet server ended with an error");
            }
        });
        Ok(FakeKubelet {
            socket: socket.to_path_buf(),
            shared,
            shutdown,
            task,
        })
    }

    pub fn set_state(&self, state: FakeKubeletState) {
        *self.shared.state.lock().unwrap_or_else(|e| e.into_inner()) = Arc::new(state);
    }

    /// Stops serving and removes the socket file. A kubelet restart is `stop` then `start`.
    pub async fn stop(self) {
        let _ = self.shutdown.send(());
        let mut task = self.task;
        if tokio::time::timeout(STOP_GRACE, &mut task).await.is_err() {
            // A client holding a connection open must not make `stop` hang.
            task.abort();
            let _ = task.await;
        }
        if let Err(err) = tokio::fs::remove_file(&self.socket).await {
            if err.kind() != std::io::ErrorKind::NotFound {
                debug!(error = %err, "removing fake kubelet socket");
            }
        }
    }

    pub fn list_calls(&self) -> u64 {
        self.shared.list_calls.load(Ordering::Relaxed)
    }

    pub fn socket(&self) -> &Path {
        &self.socket
    }
}

/// Serves junk on `socket`: every connection gets pseudo-random bytes and is closed. For
/// fault tests of the client's handling of a peer that does not speak gRPC.
pub async fn serve_garbage(socket: &Path) -> std::io::Result<JoinHandle<()>> {
    let listener = bind_fresh(socket).await?;
    Ok(tokio::spawn(async move {
        let mut seed = seed();
        loop {
            match listener.accept().await {
                Ok((stream, _)) => {
                    seed = seed.wrapping_add(0x9E37_79B9_7F4A_7C15);
                    tokio::spawn(write_junk(stream, seed));
                }
                Err(err) => {
                    debug!(error = %err, "garbage server accept failed");
                    return;
                }
            }
        }
    }))
}

async fn bind_fresh(socket: &Path) -> std::io::Result<UnixListener> {
    match tokio::fs::remove_file(socket).await {
        Err(err) if err.kind() != std::io::ErrorKind::NotFound => return Err(err),
        _ => {}
    }
    UnixListener::bind(socket)
}

fn seed() -> u64 {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos() as u64)
        .unwrap_or(0);
    nanos | 1
}

async fn write_junk(stream: UnixStream, mut state: u64) {
    let mut junk = vec![0u8; 16 * 1024];
    for chunk in junk.chunks_mut(8) {
        // xorshift64: enough entropy to be garbage, no RNG dependency.
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        let bytes = state.to_le_bytes();
        chunk.copy_from_slice(&bytes[..chunk.len()]);
    }
    let mut written = 0;
    while written < junk.len() {
        if stream.writable().await.is_err() {
            return;
        }
        match stream.try_write(&junk[written..]) {
            Ok(n) => written += n,
            Err(err) if err.kind() == std::io::ErrorKind::WouldBlock => continue,
            Err(_) => return,
        }
    }
}

struct Lister {
    shared: Arc<Shared>,
}

impl Lister {
    /// Applies the injected delay and failure; returns the state to answer from.
    async fn prepare(&self) -> Result<Arc<FakeKubeletState>, Status> {
        let state = self.shared.state();
        if let Some(delay) = state.delay {
            tokio::time::sleep(delay).await;
        }
        match state.fail_with {
            Some(code) => Err(Status::new(code, "injected failure")),
            None => Ok(state),
        }
    }
}

#[tonic::async_trait]
impl server::PodResourcesLister for Lister {
    async fn list(
        &self,
        _request: Request<pb::ListPodResourcesRequest>,
    ) -> Result<Response<pb::ListPodResourcesResponse>, Status> {
        self.shared.list_calls.fetch_add(1, Ordering::Relaxed);
        let state = self.prepare().await?;
        Ok(Response::new(list_response(&state)))
    }

    async fn get_allocatable_resources(
        &self,
        _request: Request<pb::AllocatableResourcesRequest>,
    ) -> Result<Response<pb::AllocatableResourcesResponse>, Status> {
        let state = self.prepare().await?;
        if state.get_allocatable_unimplemented {
            return Err(Status::unimplemented("GetAllocatableResources"));
        }
        let mut devices: Vec<pb::ContainerDevices> = Vec::new();
        for (resource, id) in &state.allocatable {
            match devices.iter_mut().find(|d| &d.resource_name == resource) {
                Some(d) => d.device_ids.push(id.clone()),
                None => devices.push(pb::ContainerDevices {
                    resource_name: resource.clone(),
                    device_ids: vec![id.clone()],
                    topology: None,
                }),
            }
        }
        Ok(Response::new(pb::AllocatableResourcesResponse {
            devices,
            ..Default::default()
        }))
    }

    async fn get(
        &self,
        request: Request<pb::GetPodResourcesRequest>,
    ) -> Result<Response<pb::GetPodResourcesResponse>, Status> {
        let state = self.prepare().await?;
        let req = request.into_inner();
        state
            .pods
            .iter()
            .find(|p| p.name == req.pod_name && p.namespace == req.pod_namespace)
            .map(|p| {
                Response::new(pb::GetPodResourcesResponse {
                    pod_resources: Some(pod_resources(p)),
                })
            })
            .ok_or_else(|| {
                Status::not_found(format!(
                    "pod {}/{} not found",
                    req.pod_namespace, req.pod_name
                ))
            })
    }
}

pub fn list_response(state: &FakeKubeletState) -> pb::ListPodResourcesResponse {
    pb::ListPodResourcesResponse {
        pod_resources: state.pods.iter().map(pod_resources).collect(),
    }
}

fn pod_resources(pod: &FakePod) -> pb::PodResources {
    pb::PodResources {
        name: pod.name.clone(),
        namespace: pod.namespace.clone(),
        containers: pod.containers.iter().map(container_resources).collect(),
    }
}

fn container_resources(c: &FakeContainer) -> pb::ContainerResources {
    pb::ContainerResources {
        name: c.name.clone(),
        devices: c
            .devices
            .iter()
            .map(|(resource, ids)| pb::ContainerDevices {
                resource_name: resource.clone(),
                device_ids: ids.clone(),
                topology: None,
            })
            .collect(),
        // One DynamicResource per device keeps the fake simple; the client flattens claims
        // to devices anyway, so the grouping is not observable.
        dynamic_resources: c
            .dynamic
            .iter()
            .map(|d| pb::DynamicResource {
                claim_name: d.claim_name.clone(),
                claim_namespace: d.claim_namespace.clone(),
                claim_resources: vec![pb::ClaimResource {
                    cdi_devices: vec![],
                    driver_name: d.driver.clone(),
                    pool_name: d.pool.clone(),
                    device_name: d.device.clone(),
                    share_id: d.share_id.clone(),
                }],
            })
            .collect(),
        ..Default::default()
    }
}

#[cfg(test)]
#[path = "kubelet_tests.rs"]
mod tests;

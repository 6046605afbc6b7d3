//! The asynchronous sources the sampler reads each cycle: pod-resources, the API server and
//! the CUDA probe's socket, real or a simulated node's.

use tokio::sync::watch;
use tokio::task::JoinHandle;

use crate::config::Settings;
use crate::sampler::Feeds;
use crate::source::kube::{self, KubeOptions};
use crate::source::podresources::spawn_poller;
use crate::source::probe::{spawn_receiver, ProbeBook};
use crate::source::SourceState;

use super::{AppError, SimulatedNode};

/// What the sampler reads, and what keeps it fed (stopped when the exporter stops).
pub(super) struct Running {
    pub feeds: Feeds,
    pub tasks: Vec<JoinHandle<()>>,
}

pub(super) async fn start(
    settings: &Settings,
    simulated_api: Option<&str>,
    simulated: Option<&mut (dyn SimulatedNode + 'static)>,
) -> Result<Running, AppError> {
    let sources = &settings.sources;
    let mut tasks = Vec::new();
    let mut feeds = Feeds::default();
    if sources.kubelet.enabled {
        let (tx, rx) = watch::channel(SourceState::default());
        tasks.push(spawn_poller(sources.kubelet.poller(), tx));
        feeds.pod_resources = Some(rx);
    }
    if sources.kube.enabled {
        if let Some((task, rx)) = start_kube(&sources.kube, simulated_api).await? {
            tasks.push(task);
            feeds.kube = Some(rx);
        }
    }
    if let Some(path) = &sources.probe.socket {
        let book = ProbeBook::new(settings.sample.activity_window);
        let task = spawn_receiver(path, book.clone())
            .map_err(|e| AppError::Failed(format!("--probe.socket: {e}")))?;
        tasks.push(task);
        feeds.probe = Some(book);
    }
    if let Some(node) = simulated {
        node.start_probe(settings, &mut feeds)?;
    }
    Ok(Running { feeds, tasks })
}

type KubeFeed = (
    JoinHandle<()>,
    watch::Receiver<SourceState<kube::ClusterView>>,
);

/// `api_url`: a simulated node's API server; otherwise in-cluster config or kubeconfig. Without an
/// API server, pods are named from pod-resources alone.
async fn start_kube(
    options: &KubeOptions,
    api_url: Option<&str>,
) -> Result<Option<KubeFeed>, AppError> {
    let client = match api_url {
        Some(url) => kube::client_for_url(url).await,
        None => kube::client_from_env().await,
    };
    let client = match client {
        Ok(client) => client,
        Err(e) => {
            tracing::warn!(
                error = %e,
                "no Kubernetes API server: pods are named from pod-resources alone (set --kube.enabled=false to silence)"
            );
            return Ok(None);
        }
    };
    let (tx, rx) = watch::channel(SourceState::default());
    let task = kube::spawn(client, options.watch(), tx)
        .await
        .map_err(|e| AppError::Config(format!("--kube.*: {e}")))?;
    Ok(Some((task, rx)))
}

//! The asynchronous sources the sampler reads each cycle: pod-resources, the API server and
//! the CUDA probe's socket, real or (with `--demo`) the demo's fakes.

use tokio::sync::watch;
use tokio::task::JoinHandle;

use crate::config::Settings;
use crate::sampler::Feeds;
use crate::source::kube::{self, KubeOptions};
use crate::source::podresources::spawn_poller;
use crate::source::probe::{spawn_receiver, ProbeBook};
use crate::source::SourceState;

use super::demo;
use super::AppError;

/// What the sampler reads, and what keeps it fed (stopped when the exporter stops).
pub(super) struct Running {
    pub feeds: Feeds,
    pub tasks: Vec<JoinHandle<()>>,
    /// The demo's simulated probe clients, alive as long as this value.
    _demo_probe: Option<demo::ProbeFeed>,
}

pub(super) async fn start(
    settings: &Settings,
    demo: Option<(&demo::Node, &demo::Services)>,
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
        let api_url = demo.map(|(_, services)| demo::api_url(services));
        if let Some((task, rx)) = start_kube(&sources.kube, api_url.as_deref()).await? {
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
    let demo_probe = match demo {
        Some((node, _)) => Some(demo::start_probe(node, settings, &mut feeds)?),
        None => None,
    };
    Ok(Running {
        feeds,
        tasks,
        _demo_probe: demo_probe,
    })
}

type KubeFeed = (
    JoinHandle<()>,
    watch::Receiver<SourceState<kube::ClusterView>>,
);

/// `api_url`: the demo's API server; otherwise in-cluster config or kubeconfig. Without an
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

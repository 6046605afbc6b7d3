//! `--demo` as two steps of building the exporter: [`prepare`] turns the resolved settings into
//! the demo node's (fake NVML library, procfs, kubelet socket) before anything reads them, and
//! [`start`] brings up the fake kubelet and API server the sources then connect to. Only with
//! the `demo` feature; without it, `no_demo.rs` stands in with the same names and no values.

use crate::config::Settings;
use crate::demo::{self, DemoNode, DemoServices};
use crate::sampler::Feeds;
use crate::source::nvml::NvmlSource;
use crate::source::probe::ProbeBook;

use super::AppError;

/// The demo node's files, alive as long as this value.
pub(super) type Node = DemoNode;
/// The demo's kubelet and API server.
pub(super) type Services = DemoServices;
/// The demo's simulated probe clients, alive as long as this value.
pub(super) type ProbeFeed = demo::repeat::Repeating;

/// `Settings → Settings`: the demo node's files replace the real node's paths. The scenario
/// path goes into the environment here, before NVML loads and before any other thread starts.
pub(super) fn prepare(mut settings: Settings) -> Result<(Settings, Option<DemoNode>), AppError> {
    if !settings.demo.enabled {
        return Ok((settings, None));
    }
    let node = demo::prepare(settings.nvml.library.as_deref(), settings.demo.fleet_node)
        .map_err(AppError::failed)?;
    std::env::set_var(demo::SCENARIO_ENV, &node.scenario);
    tracing::warn!("serving the built-in DEMO node: every figure is simulated");
    settings.nvml.library = Some(node.library.clone());
    settings.nvml.procfs = node.procfs.clone();
    settings.sources.kubelet.socket = node.kubelet_socket();
    Ok((settings, Some(node)))
}

/// The demo kubelet allocates the devices the fake NVML reports, so the sampler's own source
/// is sampled once here (blocking, but before anything is served).
pub(super) async fn start(
    node: &DemoNode,
    settings: &Settings,
    source: Option<&mut NvmlSource>,
) -> Result<DemoServices, AppError> {
    let Some(source) = source else {
        return Err(AppError::Failed("demo: the fake NVML did not start".into()));
    };
    let gpus = tokio::task::block_in_place(|| source.sample().gpus);
    demo::start_services(node, &settings.sources.kube.node_name, &gpus)
        .await
        .map_err(AppError::failed)
}

/// The demo API server's URL, for the kube source.
pub(super) fn api_url(services: &DemoServices) -> String {
    services.api.url()
}

/// The demo's GPU 5 shows the exact mode: its MPS clients "carry" the probe.
pub(super) fn start_probe(
    node: &DemoNode,
    settings: &Settings,
    feeds: &mut Feeds,
) -> Result<ProbeFeed, AppError> {
    let book = feeds
        .probe
        .get_or_insert_with(|| ProbeBook::new(settings.sample.activity_window))
        .clone();
    demo::probe::start(&node.scenario_text, &demo::probe::PROBED_PIDS, book)
        .map_err(AppError::failed)
}

/// Stops the fake servers, then removes the node's files.
pub(super) async fn stop(services: Option<DemoServices>, node: Option<DemoNode>) {
    if let Some(s) = services {
        s.stop().await;
    }
    drop(node);
}

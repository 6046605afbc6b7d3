//! `--demo` as two steps of building the exporter: [`prepare`] turns the resolved settings into
//! the demo node's (fake NVML library, procfs, kubelet socket) before anything reads them, and
//! [`start`] brings up the fake kubelet and API server the sources then connect to.

use crate::config::Settings;
use crate::demo::{self, DemoNode, DemoServices};
use crate::source::nvml::NvmlSource;

use super::AppError;

/// `Settings → Settings`: the demo node's files replace the real node's paths. The scenario
/// path goes into the environment here, before NVML loads and before any other thread starts.
pub(super) fn prepare(settings: Settings) -> Result<(Settings, Option<DemoNode>), AppError> {
    if !settings.demo {
        return Ok((settings, None));
    }
    let node = demo::prepare(settings.nvml_library.as_deref(), settings.demo_fleet_node)
        .map_err(AppError::failed)?;
    std::env::set_var(demo::SCENARIO_ENV, &node.scenario);
    tracing::warn!("serving the built-in DEMO node: every figure is simulated");
    let settings = Settings {
        nvml_library: Some(node.library.clone()),
        procfs: node.procfs.clone(),
        pod_resources_socket: node.kubelet_socket(),
        ..settings
    };
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
    demo::start_services(node, &settings.node_name, &gpus)
        .await
        .map_err(AppError::failed)
}

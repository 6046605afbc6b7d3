//! `--demo` as two steps of building the exporter (`tessera_exporter::app`): [`simulation`]'s `prepare`
//! turns the resolved settings into the demo node's (fake NVML library, procfs, kubelet socket)
//! before anything reads them, and the node's `start` brings up the fake kubelet and API server the
//! sources then connect to.

use futures::future::LocalBoxFuture;
use tessera_exporter::app::{AppError, SimulatedNode, Simulation};
use tessera_exporter::config::Settings;
use tessera_exporter::sampler::Feeds;
use tessera_exporter::source::nvml::NvmlSource;
use tessera_exporter::source::probe::ProbeBook;

use crate::repeat::Repeating;
use crate::{DemoNode, DemoServices};

/// The demo node for `tessera_exporter::app::run`; `fleet_node`: run as that node of a simulated fleet
/// (`--demo.fleet-node`).
pub fn simulation(fleet_node: Option<u32>) -> Simulation {
    Box::new(move |settings| prepare(settings, fleet_node))
}

/// The demo node's files, its kubelet and API server once started, and its simulated probe
/// clients, each alive as long as this value.
struct Running {
    node: DemoNode,
    services: Option<DemoServices>,
    probe: Option<Repeating>,
}

/// `Settings → Settings`: the demo node's files replace the real node's paths. The scenario
/// path goes into the environment here, before NVML loads and before any other thread starts.
fn prepare(
    mut settings: Settings,
    fleet_node: Option<u32>,
) -> Result<(Settings, Box<dyn SimulatedNode>), AppError> {
    let node =
        crate::prepare(settings.nvml.library.as_deref(), fleet_node).map_err(AppError::failed)?;
    std::env::set_var(crate::SCENARIO_ENV, &node.scenario);
    tracing::warn!("serving the built-in DEMO node: every figure is simulated");
    settings.nvml.library = Some(node.library.clone());
    settings.nvml.procfs = node.procfs.clone();
    settings.sources.kubelet.socket = node.kubelet_socket();
    let running = Running {
        node,
        services: None,
        probe: None,
    };
    Ok((settings, Box::new(running)))
}

impl SimulatedNode for Running {
    /// The demo kubelet allocates the devices the fake NVML reports, so the sampler's own
    /// source is sampled once here (blocking, but before anything is served).
    fn start<'a>(
        &'a mut self,
        settings: &'a Settings,
        source: Option<&'a mut NvmlSource>,
    ) -> LocalBoxFuture<'a, Result<String, AppError>> {
        Box::pin(async move {
            let Some(source) = source else {
                return Err(AppError::Failed("demo: the fake NVML did not start".into()));
            };
            let gpus = tokio::task::block_in_place(|| source.sample().gpus);
            let services =
                crate::start_services(&self.node, &settings.sources.kube.node_name, &gpus)
                    .await
                    .map_err(AppError::failed)?;
            let url = services.api.url();
            self.services = Some(services);
            Ok(url)
        })
    }

    /// The demo's GPU 5 shows the exact mode: its MPS clients "carry" the probe.
    fn start_probe(&mut self, settings: &Settings, feeds: &mut Feeds) -> Result<(), AppError> {
        let book = feeds
            .probe
            .get_or_insert_with(|| ProbeBook::new(settings.sample.activity_window))
            .clone();
        let probe = crate::probe::start(&self.node.scenario_text, &crate::probe::PROBED_PIDS, book)
            .map_err(AppError::failed)?;
        self.probe = Some(probe);
        Ok(())
    }

    /// Stops the fake servers, then removes the node's files.
    fn stop(self: Box<Self>) -> LocalBoxFuture<'static, ()> {
        Box::pin(async move {
            let Running {
                node,
                services,
                probe,
            } = *self;
            if let Some(s) = services {
                s.stop().await;
            }
            drop(node);
            drop(probe);
        })
    }
}

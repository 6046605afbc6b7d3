//! The running exporter, built from resolved [`Settings`]: the simulated node (when the binary
//! hands one over), the NVML source, the asynchronous sources, the sampler thread and
//! the servers. `main` only parses and hands over; every failure comes back as an [`AppError`]
//! with its exit code.

mod sources;

use std::net::SocketAddr;
use std::path::PathBuf;

use futures::future::LocalBoxFuture;
use tokio::net::TcpListener;

use crate::config::Settings;
use crate::model::device_id::ResourceMatcher;
use crate::sampler::{Feeds, Sampler, SamplerConfig};
use crate::server::{router, AppState};
use crate::source::nvml::{NvmlOpenError, NvmlSource};
use crate::web::{WebConfig, WebConfigError};

/// Why the exporter did not start or stopped; `main` prints it after `tessera: `.
#[derive(Debug, thiserror::Error)]
pub enum AppError {
    /// A setting that only proves bad once used (a web config file, the API server's answer
    /// to `--kube.*`): exit code 2, like a bad flag.
    #[error("{0}")]
    Config(String),
    /// Anything else that stops the exporter: exit code 1.
    #[error("{0}")]
    Failed(String),
}

impl AppError {
    pub fn exit_code(&self) -> u8 {
        match self {
            AppError::Config(_) => 2,
            AppError::Failed(_) => 1,
        }
    }

    /// Anything that stops the exporter, said as `e` says it.
    pub fn failed(e: impl std::fmt::Display) -> Self {
        AppError::Failed(e.to_string())
    }
}

impl From<WebConfigError> for AppError {
    fn from(e: WebConfigError) -> Self {
        AppError::Config(e.to_string())
    }
}

type LoadedWeb = Option<(PathBuf, WebConfig)>;

/// A simulated node the exporter serves instead of the real one. It lives outside the exporter;
/// a binary that carries one hands it to [`run`]. `Settings → Settings`: the node's files replace
/// the real node's paths. Called before NVML loads and before any other thread starts.
pub type Simulation =
    Box<dyn FnOnce(Settings) -> Result<(Settings, Box<dyn SimulatedNode>), AppError>>;

/// The simulated node, alive (its files, fake servers and probe clients) until [`stop`](Self::stop).
pub trait SimulatedNode {
    /// Brings up the node's kubelet and API server once NVML is open, before anything is
    /// served; returns the API server's URL, for the kube source.
    fn start<'a>(
        &'a mut self,
        settings: &'a Settings,
        source: Option<&'a mut NvmlSource>,
    ) -> LocalBoxFuture<'a, Result<String, AppError>>;
    /// Starts the node's simulated probe clients, fed into `feeds`.
    fn start_probe(&mut self, settings: &Settings, feeds: &mut Feeds) -> Result<(), AppError>;
    /// Stops the fake servers, then removes the node's files.
    fn stop(self: Box<Self>) -> LocalBoxFuture<'static, ()>;
}

/// Builds the exporter from `settings` and serves until SIGINT or SIGTERM; `simulation`: the
/// simulated node to serve, if any; `no_gpu_hint`: where a machine without a GPU library may
/// turn instead, said after "NVML library not found (…); ".
pub fn run(
    settings: Settings,
    simulation: Option<Simulation>,
    no_gpu_hint: Option<&str>,
) -> Result<(), AppError> {
    crate::log::init(&settings.log);
    // Read before the runtime starts (blocking I/O); a bad file stops startup like a bad flag.
    let web = match &settings.web.config_file {
        Some(path) => Some((path.clone(), crate::web::load(path)?)),
        None => None,
    };
    let (settings, node) = match simulation {
        None => (settings, None),
        Some(prepare) => {
            let (settings, node) = prepare(settings)?;
            (settings, Some(node))
        }
    };
    let source = match (
        NvmlSource::open(settings.nvml.clone(), &settings.log),
        no_gpu_hint,
    ) {
        (Ok(source), _) => Some(source),
        (Err(NvmlOpenError::NotFound { detail }), Some(hint)) => {
            return Err(AppError::Failed(format!(
                "NVML library not found ({detail}); {hint}"
            )))
        }
        (Err(e @ NvmlOpenError::NotFound { .. }), None) => return Err(AppError::failed(e)),
        // The driver may still be loading: the sampler retries and /readyz stays false.
        (Err(e), _) => {
            tracing::warn!(error = %e, "NVML not ready at start");
            None
        }
    };
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .map_err(|e| AppError::Failed(format!("cannot start the async runtime: {e}")))?;
    runtime.block_on(serve(settings, node, web, source))
}

fn sampler_config(s: &Settings) -> SamplerConfig {
    SamplerConfig {
        sample: s.sample.clone(),
        node: s.sources.kube.node_name.clone(),
        nvml: s.nvml.clone(),
        log: s.log.clone(),
        encode: s.metrics.encode(),
        resources: ResourceMatcher::new(s.sources.kubelet.resource_names.clone()),
    }
}

/// The listeners, bound before any source starts, so a taken port is the last line before
/// exit 1 and not buried under the log lines of sources that were about to be stopped anyway.
struct Listeners {
    main: TcpListener,
    /// `--web.dcgm-listen-address`, with its own read of the web config (each server watches
    /// the file for changes).
    dcgm: Option<(TcpListener, LoadedWeb)>,
}

async fn bind(addr: SocketAddr, flag: &str) -> Result<TcpListener, AppError> {
    TcpListener::bind(addr)
        .await
        .map_err(|e| AppError::Failed(format!("cannot listen on {addr}{flag}: {e}")))
}

async fn bind_listeners(settings: &Settings, web: &LoadedWeb) -> Result<Listeners, AppError> {
    let main = bind(settings.web.listen_address, "").await?;
    let Some(addr) = settings.web.dcgm_listen_address else {
        return Ok(Listeners { main, dcgm: None });
    };
    let listener = bind(addr, " (--web.dcgm-listen-address)").await?;
    let dcgm_web = match web {
        Some((path, _)) => {
            let path = path.clone();
            let loaded =
                tokio::task::spawn_blocking(move || crate::web::load(&path).map(|c| (path, c)))
                    .await
                    .map_err(|e| AppError::Failed(format!("cannot read the web config: {e}")))?;
            Some(loaded?)
        }
        None => None,
    };
    Ok(Listeners {
        main,
        dcgm: Some((listener, dcgm_web)),
    })
}

async fn serve(
    settings: Settings,
    mut node: Option<Box<dyn SimulatedNode>>,
    web: LoadedWeb,
    mut source: Option<NvmlSource>,
) -> Result<(), AppError> {
    let listeners = bind_listeners(&settings, &web).await?;
    let api_url = match node.as_mut() {
        Some(node) => Some(node.start(&settings, source.as_mut()).await?),
        None => None,
    };
    let running = sources::start(&settings, api_url.as_deref(), node.as_deref_mut()).await?;
    let (tx, rx) = tokio::sync::watch::channel(None);
    let mut sampler = Sampler::new(sampler_config(&settings), running.feeds, tx);
    if let Some(source) = source {
        sampler.adopt(source);
    }
    let (stop_tx, stop_rx) = std::sync::mpsc::channel();
    let sampler = sampler
        .spawn(stop_rx)
        .map_err(|e| AppError::Failed(format!("cannot start the sampler thread: {e}")))?;
    tracing::info!(address = %settings.web.listen_address, node = %settings.sources.kube.node_name, "serving metrics");
    let mut tasks = running.tasks;
    let (down_tx, down_rx) = tokio::sync::watch::channel(false);
    let down = move || {
        let mut rx = down_rx.clone();
        async move {
            let _ = rx.wait_for(|d| *d).await;
        }
    };
    tasks.push(tokio::spawn(async move {
        shutdown_signal().await;
        let _ = down_tx.send(true);
    }));
    let dcgm_server = listeners.dcgm.map(|(l, dcgm_web)| {
        tracing::info!(address = ?l.local_addr().ok(), "serving dcgm-exporter-compatible metrics");
        let app = crate::server::dcgm_router(rx.clone());
        tokio::spawn(crate::web::serve(l, app, dcgm_web, down()))
    });
    let app = router(AppState {
        published: rx,
        enable_debug: settings.web.enable_debug,
    });
    let mut served = crate::web::serve(listeners.main, app, web, down()).await;
    if let Some(d) = dcgm_server {
        match d.await {
            Ok(Err(e)) if served.is_ok() => served = Err(e),
            _ => {}
        }
    }
    drop(stop_tx);
    let _ = tokio::task::spawn_blocking(move || sampler.join()).await;
    for t in tasks {
        t.abort();
    }
    if let Some(node) = node {
        node.stop().await;
    }
    served.map_err(|e| AppError::Failed(format!("server failed: {e}")))
}

async fn shutdown_signal() {
    let ctrl_c = async {
        let _ = tokio::signal::ctrl_c().await;
    };
    let term = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut s) => {
                s.recv().await;
            }
            Err(_) => std::future::pending::<()>().await,
        }
    };
    tokio::select! { _ = ctrl_c => {}, _ = term => {} }
    tracing::info!("shutting down");
}

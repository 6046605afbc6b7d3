use std::io::IsTerminal;
use std::process::ExitCode;

use tessera::config::{Cli, Command, LogFormat, Settings};
use tessera::demo::{self, DemoNode};
use tessera::metrics::{self, EncodeOptions};
use tessera::model::device_id::ResourceMatcher;
use tessera::sampler::{Feeds, Sampler, SamplerConfig};
use tessera::server::{router, AppState};
use tessera::source::kube::{self, KubeConfig};
use tessera::source::nvml::{self, NvmlOpenError, NvmlOptions, NvmlSource};
use tessera::source::podresources::{spawn_poller, PodResourcesConfig};
use tessera::source::SourceState;

fn init_tracing(s: &Settings) {
    let builder = tracing_subscriber::fmt()
        .with_max_level(s.log_level)
        .with_writer(std::io::stderr)
        // Colour codes only for a person at a terminal: not in kubectl logs, files or CI.
        .with_ansi(std::io::stderr().is_terminal() && std::env::var_os("NO_COLOR").is_none());
    match s.log_format {
        LogFormat::Json => builder.json().init(),
        LogFormat::Text => builder.init(),
    }
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

fn main() -> ExitCode {
    // A worker process that owns NVML for the exporter (`--nvml.isolation=process`).
    let mut args = std::env::args_os();
    if args.nth(1).is_some_and(|a| a == nvml::isolate::WORKER_ARG) {
        let config = args.next().unwrap_or_default();
        return match nvml::isolate::child::run(&config.to_string_lossy()) {
            Ok(()) => ExitCode::SUCCESS,
            Err(nvml::isolate::child::WorkerError::Reported(_)) => ExitCode::from(3),
            Err(e) => {
                eprintln!("tessera-nvml-worker: {e}");
                ExitCode::from(3)
            }
        };
    }
    // glibc gives every thread that allocates an arena of its own; an exporter with a thread
    // per GPU needs none of that concurrency, and each arena costs resident memory.
    // SAFETY: mallopt only tunes the allocator; called before any other thread exists.
    unsafe {
        libc::mallopt(libc::M_ARENA_MAX, 2);
    }
    let cli = match Cli::parse_args(std::env::args_os()) {
        Ok(c) => c,
        Err(e) => {
            let _ = e.print();
            return if e.use_stderr() {
                ExitCode::from(2)
            } else {
                ExitCode::SUCCESS
            };
        }
    };
    match &cli.command {
        Some(Command::Advise(args)) => {
            return match tessera::advise::main(args) {
                Ok(()) => ExitCode::SUCCESS,
                Err(e) => {
                    eprintln!("tessera advise: {e}");
                    ExitCode::from(e.exit_code())
                }
            };
        }
        Some(Command::InstallProbe { dir }) => {
            return match tessera::install::install_probe(dir) {
                Ok(path) => {
                    println!("installed {}", path.display());
                    ExitCode::SUCCESS
                }
                Err(e) => {
                    eprintln!("tessera install-probe: {e}");
                    ExitCode::from(1)
                }
            };
        }
        None => {}
    }
    if cli.print_metrics_doc {
        print!("{}", metrics::markdown_reference());
        return ExitCode::SUCCESS;
    }
    let mut settings = match Settings::resolve(&cli) {
        Ok(s) => s,
        Err(errors) => {
            for e in errors {
                eprintln!("tessera: {e}");
            }
            return ExitCode::from(2);
        }
    };
    init_tracing(&settings);
    // Read before the runtime starts (blocking I/O); a bad file stops startup like a bad flag.
    let web = match &settings.web_config_file {
        Some(path) => match tessera::web::load(path) {
            Ok(config) => Some((path.clone(), config)),
            Err(e) => {
                eprintln!("tessera: {e}");
                return ExitCode::from(2);
            }
        },
        None => None,
    };

    // The demo's files must exist, and its scenario path be in the environment, before NVML
    // loads and before any other thread starts.
    let demo_node = if settings.demo {
        match demo::prepare(settings.nvml_library.as_deref(), settings.demo_fleet_node) {
            Ok(d) => {
                std::env::set_var(demo::SCENARIO_ENV, &d.scenario);
                settings.nvml_library = Some(d.library.clone());
                settings.procfs = d.procfs.clone();
                tracing::warn!("serving the built-in DEMO node: every figure is simulated");
                Some(d)
            }
            Err(e) => {
                eprintln!("tessera: {e}");
                return ExitCode::from(1);
            }
        }
    } else {
        None
    };

    let source = match NvmlSource::open(settings.nvml_library.as_deref(), nvml_options(&settings)) {
        Ok(source) => Some(source),
        Err(e @ NvmlOpenError::NotFound { .. }) => {
            eprintln!("tessera: {e}");
            return ExitCode::from(1);
        }
        // The driver may still be loading: the sampler retries and /readyz stays false.
        Err(e) => {
            tracing::warn!(error = %e, "NVML not ready at start");
            None
        }
    };

    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
    {
        Ok(r) => r,
        Err(e) => {
            eprintln!("tessera: cannot start the async runtime: {e}");
            return ExitCode::from(1);
        }
    };
    runtime.block_on(run(settings, demo_node, web, source))
}

fn nvml_options(s: &Settings) -> NvmlOptions {
    NvmlOptions {
        procfs: s.procfs.clone(),
        slow_interval: s.nvml_slow_interval,
        process_interval: s.nvml_process_interval,
        collect_processes: s.collect_processes,
        collect_mig: s.collect_mig,
        collect_gpm: s.collect_gpm,
        isolation: s.nvml_isolation,
        gpu_timeout: s.nvml_timeout,
        log_level: s.log_level.to_string(),
        log_json: matches!(s.log_format, LogFormat::Json),
    }
}

async fn run(
    mut settings: Settings,
    demo_node: Option<DemoNode>,
    web: Option<(std::path::PathBuf, tessera::web::WebConfig)>,
    mut source: Option<NvmlSource>,
) -> ExitCode {
    // Bound before any source starts, so a taken port is the last line before exit 1 and not
    // buried under the log lines of sources that were about to be stopped anyway.
    let listener = match tokio::net::TcpListener::bind(settings.listen_address).await {
        Ok(l) => l,
        Err(e) => {
            eprintln!("tessera: cannot listen on {}: {e}", settings.listen_address);
            return ExitCode::from(1);
        }
    };
    let dcgm_listener = match settings.dcgm_listen_address {
        Some(addr) => match tokio::net::TcpListener::bind(addr).await {
            Ok(l) => Some(l),
            Err(e) => {
                eprintln!("tessera: cannot listen on {addr} (--web.dcgm-listen-address): {e}");
                return ExitCode::from(1);
            }
        },
        None => None,
    };
    // The second listener gets the same TLS and auth as the first, from its own read of the
    // file (each server watches it for changes).
    let dcgm_web = match (&dcgm_listener, &web) {
        (Some(_), Some((path, _))) => {
            let path = path.clone();
            match tokio::task::spawn_blocking(move || tessera::web::load(&path).map(|c| (path, c)))
                .await
            {
                Ok(Ok(w)) => Some(w),
                Ok(Err(e)) => {
                    eprintln!("tessera: {e}");
                    return ExitCode::from(2);
                }
                Err(e) => {
                    eprintln!("tessera: cannot read the web config: {e}");
                    return ExitCode::from(1);
                }
            }
        }
        _ => None,
    };
    let mut tasks = Vec::new();
    let mut feeds = Feeds::default();

    let demo_services = match &demo_node {
        Some(node) => {
            // The demo kubelet allocates the devices the fake NVML reports.
            let Some(source) = source.as_mut() else {
                eprintln!("tessera: demo: the fake NVML did not start");
                return ExitCode::from(1);
            };
            // The sampler's own source, sampled once for the demo kubelet (blocking, but
            // before anything is served).
            let gpus = tokio::task::block_in_place(|| source.sample().gpus);
            match demo::start_services(node, &settings.node_name, &gpus).await {
                Ok(s) => {
                    settings.pod_resources_socket = s.socket.clone();
                    Some(s)
                }
                Err(e) => {
                    eprintln!("tessera: {e}");
                    return ExitCode::from(1);
                }
            }
        }
        None => None,
    };

    if settings.kubelet_enabled {
        let (tx, rx) = tokio::sync::watch::channel(SourceState::default());
        tasks.push(spawn_poller(
            PodResourcesConfig {
                socket: settings.pod_resources_socket.clone(),
                interval: settings.kubelet_poll_interval,
                ..PodResourcesConfig::default()
            },
            tx,
        ));
        feeds.pod_resources = Some(rx);
    }
    if settings.kube_enabled {
        let client = match &demo_services {
            Some(d) => kube::client_for_url(&d.api.url()).await,
            None => kube::client_from_env().await,
        };
        let cfg = KubeConfig {
            pod_labels: settings.pod_labels.clone(),
            dra: settings.kube_dra,
            ..KubeConfig::new(settings.node_name.clone())
        };
        let (tx, rx) = tokio::sync::watch::channel(SourceState::default());
        match client {
            Ok(client) => match kube::spawn(client, cfg, tx).await {
                Ok(task) => {
                    tasks.push(task);
                    feeds.kube = Some(rx);
                }
                Err(e) => {
                    eprintln!("tessera: --kube.*: {e}");
                    return ExitCode::from(2);
                }
            },
            Err(e) => tracing::warn!(
                error = %e,
                "no Kubernetes API server: pods are named from pod-resources alone (set --kube.enabled=false to silence)"
            ),
        }
    }

    if let Some(path) = &settings.probe_socket {
        let book = tessera::source::probe::ProbeBook::new(settings.activity_window);
        match tessera::source::probe::spawn_receiver(path, book.clone()) {
            Ok(task) => {
                tasks.push(task);
                feeds.probe = Some(book);
            }
            Err(e) => {
                eprintln!("tessera: --probe.socket: {e}");
                return ExitCode::from(1);
            }
        }
    }

    // The demo's GPU 5 shows the exact mode: its MPS clients "carry" the probe.
    let _demo_probe = match &demo_node {
        Some(node) => {
            let book = feeds.probe.get_or_insert_with(Default::default).clone();
            match demo::probe::start(&node.scenario_text, &demo::probe::PROBED_PIDS, book) {
                Ok(feed) => Some(feed),
                Err(e) => {
                    eprintln!("tessera: {e}");
                    return ExitCode::from(1);
                }
            }
        }
        None => None,
    };

    let (tx, rx) = tokio::sync::watch::channel(None);
    let mut sampler = Sampler::new(
        SamplerConfig {
            interval: settings.sample_interval,
            node: settings.node_name.clone(),
            nvml_library: settings.nvml_library.clone(),
            nvml: nvml_options(&settings),
            encode: EncodeOptions {
                max_label_value_len: settings.max_label_value_len,
                max_series: settings.max_series,
                dcgm_compat: settings.dcgm_compat,
                detail: settings.metrics_detail,
                ..EncodeOptions::default()
            },
            resources: ResourceMatcher::new(settings.resource_names.clone()),
            activity_window: settings.activity_window,
        },
        feeds,
        tx,
    );
    if let Some(source) = source {
        sampler.adopt(source);
    }
    let (stop_tx, stop_rx) = std::sync::mpsc::channel();
    let sampler = match sampler.spawn(stop_rx) {
        Ok(h) => h,
        Err(e) => {
            eprintln!("tessera: cannot start the sampler thread: {e}");
            return ExitCode::from(1);
        }
    };
    tracing::info!(address = %settings.listen_address, node = %settings.node_name, "serving metrics");
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
    let dcgm_server = dcgm_listener.map(|l| {
        tracing::info!(address = ?l.local_addr().ok(), "serving dcgm-exporter-compatible metrics");
        let app = tessera::server::dcgm_router(rx.clone());
        tokio::spawn(tessera::web::serve(l, app, dcgm_web, down()))
    });
    let app = router(AppState {
        published: rx,
        enable_debug: settings.enable_debug,
    });
    let mut served = tessera::web::serve(listener, app, web, down()).await;
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
    if let Some(d) = demo_services {
        d.api.stop();
        d.kubelet.stop().await;
    }
    drop(demo_node);
    match served {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("tessera: server failed: {e}");
            ExitCode::from(1)
        }
    }
}

use std::process::ExitCode;
use std::sync::Arc;

use clap::Parser;
use tessera::config::{Cli, LogFormat, Settings};
use tessera::metrics::EncodeOptions;
use tessera::sampler::{Sampler, SamplerConfig};
use tessera::server::{router, AppState};
use tessera::source::nvml::{self, NvmlOpenError, NvmlOptions};
use tessera::{demo, metrics};

fn init_tracing(s: &Settings) {
    let builder = tracing_subscriber::fmt()
        .with_max_level(s.log_level)
        .with_writer(std::io::stderr);
    match s.log_format {
        LogFormat::Json => builder.json().init(),
        LogFormat::Text => builder.init(),
    }
}

async fn shutdown_signal() {
    let ctrl_c = async {
        let _ = tokio::signal::ctrl_c().await;
    };
    #[cfg(unix)]
    let term = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut s) => {
                s.recv().await;
            }
            Err(_) => std::future::pending::<()>().await,
        }
    };
    #[cfg(not(unix))]
    let term = std::future::pending::<()>();
    tokio::select! { _ = ctrl_c => {}, _ = term => {} }
    tracing::info!("shutting down");
}

fn main() -> ExitCode {
    let cli = match Cli::try_parse() {
        Ok(c) => c,
        Err(e) => {
            let _ = e.print();
            return if e.use_stderr() { ExitCode::from(2) } else { ExitCode::SUCCESS };
        }
    };
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

    // The demo's files must exist, and its scenario path be in the environment, before NVML
    // loads and before any other thread starts.
    let demo_node = if settings.demo {
        match demo::prepare(settings.nvml_library.as_deref()) {
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

    match nvml::open(settings.nvml_library.as_deref()) {
        Ok(_) => {}
        Err(e @ NvmlOpenError::NotFound { .. }) => {
            eprintln!("tessera: {e}");
            return ExitCode::from(1);
        }
        // The driver may still be loading: the sampler retries and /readyz stays false.
        Err(e) => tracing::warn!(error = %e, "NVML not ready at start"),
    }

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
    let code = runtime.block_on(run(settings));
    drop(demo_node);
    code
}

async fn run(settings: Settings) -> ExitCode {
    let (tx, rx) = tokio::sync::watch::channel(None);
    let sampler = Sampler::new(
        SamplerConfig {
            interval: settings.sample_interval,
            node: settings.node_name.clone(),
            nvml_library: settings.nvml_library.clone(),
            nvml: NvmlOptions {
                procfs: settings.procfs.clone(),
                slow_interval: settings.nvml_slow_interval,
                collect_processes: settings.collect_processes,
                collect_mig: settings.collect_mig,
            },
            encode: EncodeOptions {
                max_label_value_len: settings.max_label_value_len,
                ..EncodeOptions::default()
            },
        },
        tx,
    );
    let (stop_tx, stop_rx) = std::sync::mpsc::channel();
    let sampler = match sampler.spawn(stop_rx) {
        Ok(h) => h,
        Err(e) => {
            eprintln!("tessera: cannot start the sampler thread: {e}");
            return ExitCode::from(1);
        }
    };
    let listener = match tokio::net::TcpListener::bind(settings.listen_address).await {
        Ok(l) => l,
        Err(e) => {
            eprintln!("tessera: cannot listen on {}: {e}", settings.listen_address);
            return ExitCode::from(1);
        }
    };
    tracing::info!(address = %settings.listen_address, node = %settings.node_name, "serving metrics");
    let app = router(AppState {
        published: rx,
        enable_debug: settings.enable_debug,
    });
    let served = axum::serve(listener, app).with_graceful_shutdown(shutdown_signal()).await;
    drop(stop_tx);
    let _ = tokio::task::spawn_blocking(move || sampler.join()).await;
    match served {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("tessera: server failed: {e}");
            ExitCode::from(1)
        }
    }
}

#[allow(dead_code)]
fn _assert_send_sync() {
    fn is<T: Send + Sync>() {}
    is::<Arc<tessera::sampler::Published>>();
}

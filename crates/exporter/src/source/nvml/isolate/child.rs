//! The worker process: loads NVML, then answers one request per line until its input closes.
//! The node's worker samples its GPUs as `--nvml.isolation=thread` does in the exporter: a
//! thread per GPU, the GPM gate between them, a deadline per sample.

use std::collections::BTreeSet;
use std::io::{BufRead, Write};
use std::time::Duration;

use super::super::worker::{sample_once, CycleState};
use super::super::{device, open, GpuState, Isolation, NvmlOptions, NvmlSource};
use super::{as_text, crash_note, Message, Request, Role, WorkerConfig};

#[derive(Debug, thiserror::Error)]
pub enum WorkerError {
    #[error("bad worker configuration: {0}")]
    Config(serde_json::Error),
    /// NVML could not start; the supervisor has been told (and logs it), so this is not
    /// printed again.
    #[error("{0}")]
    Reported(String),
    #[error("cannot write to the supervisor: {0}")]
    Output(std::io::Error),
}

fn init_log(config: &WorkerConfig) {
    let level = config
        .log_level
        .parse::<tracing::Level>()
        .unwrap_or(tracing::Level::INFO);
    let builder = tracing_subscriber::fmt()
        .with_max_level(level)
        .with_writer(std::io::stderr)
        .with_ansi(false);
    if config.log_json {
        builder.json().init();
    } else {
        builder.init();
    }
}

fn write(out: &mut impl Write, message: &Message) -> Result<(), WorkerError> {
    let mut line = serde_json::to_vec(message).map_err(|e| WorkerError::Output(e.into()))?;
    line.push(b'\n');
    out.write_all(&line)
        .and_then(|()| out.flush())
        .map_err(WorkerError::Output)
}

/// Runs a worker; `Ok` when the supervisor closed its input.
pub fn run(config_json: &str) -> Result<(), WorkerError> {
    let config: WorkerConfig = serde_json::from_str(config_json).map_err(WorkerError::Config)?;
    crash_note::install();
    init_log(&config);
    let mut out = std::io::stdout().lock();
    let nvml = match open(config.library.as_deref()) {
        Ok(n) => n,
        Err(e) => {
            // A missing library travels as its detail: the supervisor words it as a missing
            // library itself, as thread mode does.
            let (not_found, message) = match &e {
                super::super::NvmlOpenError::NotFound { detail } => (true, detail.clone()),
                other => (false, other.to_string()),
            };
            write(&mut out, &Message::InitFailed { not_found, message })?;
            return Err(WorkerError::Reported(e.to_string()));
        }
    };
    // What a worker's calls read; the rest (the library, open already) keep their defaults.
    let opts = NvmlOptions {
        procfs: config.procfs.clone(),
        slow_interval: Duration::from_millis(config.slow_interval_ms),
        process_interval: Duration::from_millis(config.process_interval_ms),
        collect_processes: config.collect_processes,
        collect_mig: config.collect_mig,
        collect_gpm: config.collect_gpm,
        isolation: Isolation::Thread,
        gpu_timeout: Duration::from_millis(config.gpu_timeout_ms.max(1)),
        ..NvmlOptions::default()
    };
    let requests = std::io::stdin().lock().lines();
    match config.role {
        Role::Node { except } => {
            let except: BTreeSet<u32> = except.into_iter().collect();
            let mut source = NvmlSource::on_threads(nvml, opts, except, true);
            write(
                &mut out,
                &Message::NodeReady {
                    driver_version: source.driver_version.clone(),
                },
            )?;
            for line in requests {
                let Ok(line) = line else { break };
                let Ok(request) = serde_json::from_str::<Request>(&line) else {
                    continue;
                };
                let reply = source.node_reply(request.slow_due);
                write(&mut out, &Message::Node(Box::new(reply)))?;
            }
        }
        Role::Gpu(index) => {
            crash_note::set_gpu(index);
            let mut cycle = CycleState::default();
            let key = format!("index:{index}");
            let handle = match nvml.device_by_index(index) {
                Ok(h) => h,
                Err(e) => {
                    let message = format!("GPU {index}: {e}");
                    write(
                        &mut out,
                        &Message::InitFailed {
                            not_found: false,
                            message: message.clone(),
                        },
                    )?;
                    return Err(WorkerError::Reported(message));
                }
            };
            let identity = device::identity(cycle.ledger(), &key, index, &handle);
            let key = if identity.uuid.is_empty() {
                key
            } else {
                identity.uuid.clone()
            };
            let mut gpu = GpuState::new(handle, identity.clone(), key);
            gpu.collect_gpm = opts.collect_gpm;
            write(
                &mut out,
                &Message::GpuReady {
                    identity: Box::new(identity),
                },
            )?;
            for line in requests {
                let Ok(line) = line else { break };
                let Ok(request) = serde_json::from_str::<Request>(&line) else {
                    continue;
                };
                let reply = sample_once(nvml, &mut gpu, &opts, &mut cycle, request.slow_due);
                write(
                    &mut out,
                    &Message::Gpu {
                        sample: Box::new(reply.sample),
                        errors: as_text(&reply.errors),
                        costs: as_text(&reply.costs),
                        failed: reply.failed,
                    },
                )?;
            }
        }
    }
    Ok(())
}

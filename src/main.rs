use std::process::ExitCode;

use tessera_exporter::config::{Command, Settings};
use tessera_exporter::source::nvml::isolate;

mod demo_flags;

use demo_flags::DemoArgs;

/// The exporter's command line with the demo's flags (refused in a build without the demo).
type Cli = tessera_exporter::config::Cli<DemoArgs>;

fn main() -> ExitCode {
    // glibc gives every thread that allocates an arena of its own; neither the exporter nor its
    // NVML worker, each with a thread per GPU, needs that concurrency, and each arena costs
    // resident memory.
    // SAFETY: mallopt only tunes the allocator; called before any other thread exists.
    unsafe {
        libc::mallopt(libc::M_ARENA_MAX, 2);
    }
    // A worker process that owns NVML for the exporter (`--nvml.isolation=process`).
    let mut args = std::env::args_os();
    if args.nth(1).is_some_and(|a| a == isolate::WORKER_ARG) {
        let config = args.next().unwrap_or_default();
        return match isolate::child::run(&config.to_string_lossy()) {
            Ok(()) => ExitCode::SUCCESS,
            Err(isolate::child::WorkerError::Reported(_)) => ExitCode::from(3),
            Err(e) => {
                eprintln!("tessera-nvml-worker: {e}");
                ExitCode::from(3)
            }
        };
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
            return match tessera_exporter::advise::main(args) {
                Ok(()) => ExitCode::SUCCESS,
                Err(e) => {
                    eprintln!("tessera advise: {e}");
                    ExitCode::from(e.exit_code())
                }
            };
        }
        Some(Command::InstallProbe { dir }) => {
            return match tessera_exporter::install::install_probe(dir) {
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
        print!("{}", tessera_exporter::metrics::markdown_reference());
        return ExitCode::SUCCESS;
    }
    if cli.print_config_doc {
        print!(
            "{}",
            tessera_exporter::config::markdown_reference::<DemoArgs>()
        );
        return ExitCode::SUCCESS;
    }
    let (settings, demo) = match Settings::resolve_with(&cli) {
        Ok(s) => s,
        Err(errors) => {
            for e in errors {
                eprintln!("tessera: {e}");
            }
            return ExitCode::from(2);
        }
    };
    // The demo node, when this build carries it (feature `demo`; release images leave it out).
    let demo = demo_flags::simulation(&demo);
    match tessera_exporter::app::run(settings, demo, demo_flags::NO_GPU_HINT) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("tessera: {e}");
            ExitCode::from(e.exit_code())
        }
    }
}

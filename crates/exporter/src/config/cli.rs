//! The command line: every component's flags, each with its `TESSERA_*` environment mirror,
//! taken as text so that `Settings::resolve` can validate them all together.

use std::collections::BTreeMap;
use std::path::PathBuf;

use clap::parser::ValueSource;
use clap::{CommandFactory, FromArgMatches, Parser};

use crate::options::Resolver;

/// Values are taken as text and validated together, so one run reports every mistake. Each
/// component declares its own flags beside the code that uses them; they are gathered here.
/// `X`: flags of the binary's own ([`BinaryFlags`]), none by default.
#[derive(Debug, Default, Parser)]
#[command(
    name = "tessera",
    version,
    about = "GPU node exporter for shared GPUs: per-pod attribution and sharing-mode labels"
)]
pub struct Cli<X: BinaryFlags = NoFlags> {
    /// YAML file with any of the settings below, keyed by flag name (e.g. `sample.interval: 2s`).
    #[arg(long = "config.file", env = "TESSERA_CONFIG_FILE")]
    pub config_file: Option<PathBuf>,
    /// The binary's own flags, listed right after `--config.file`.
    #[command(flatten)]
    pub binary: X,
    /// Print docs/metrics.md (generated from the metric table) and exit.
    #[arg(long = "print-metrics-doc", hide = true)]
    pub print_metrics_doc: bool,
    /// Print docs/configuration.md (generated from these flags) and exit.
    #[arg(long = "print-config-doc", hide = true)]
    pub print_config_doc: bool,
    #[command(flatten)]
    pub web: crate::web::WebArgs,
    #[command(flatten)]
    pub sample: crate::sampler::SampleArgs,
    #[command(flatten)]
    pub nvml: crate::source::nvml::NvmlArgs,
    #[command(flatten)]
    pub metrics: crate::metrics::MetricsArgs,
    #[command(flatten)]
    pub sources: crate::source::SourceArgs,
    #[command(flatten)]
    pub log: crate::log::LogArgs,
    /// Flags whose value came from their environment mirror, with the variable's name, so an
    /// invalid value names where it was set. Filled by [`Cli::parse_args`].
    #[arg(skip)]
    pub from_env: BTreeMap<String, String>,
    #[command(subcommand)]
    pub command: Option<Command>,
}

/// Flags a binary adds to the exporter's command line (e.g. a simulated node to serve): listed
/// right after `--config.file`, resolved first, with the same [`Resolver`], so their mistakes are
/// reported with the rest and a config file's keys are checked against them too.
pub trait BinaryFlags: clap::Args + Default + std::fmt::Debug {
    /// What the flags resolve to; the binary keeps it.
    type Options;
    /// Resolves the flags; also returns the exporter's defaults they change.
    fn resolve(&self, r: &mut Resolver) -> (Self::Options, Defaults);
    /// The whole command line, to change once built: e.g. the help of a flag whose default
    /// these flags change.
    fn finish(command: clap::Command) -> clap::Command {
        command
    }
    /// Sentences docs/configuration.md adds after "Flags win over the environment, which wins
    /// over the file.", each line ending in `\n`: e.g. a flag that is no key of the file.
    const DOC_PRECEDENCE: &'static str = "";
    /// The environment variable docs/configuration.md sets to `1` to show a boolean's spellings.
    const DOC_BOOL_EXAMPLE: &'static str = "TESSERA_WEB_ENABLE_DEBUG";
}

/// No flags beside the exporter's.
#[derive(Debug, Default, Clone, Copy, clap::Args)]
pub struct NoFlags {}

impl BinaryFlags for NoFlags {
    type Options = ();
    fn resolve(&self, _: &mut Resolver) -> ((), Defaults) {
        ((), Defaults::default())
    }
}

/// Exporter defaults a binary's flags change; each still gives way to its flag, environment
/// variable or file key.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Defaults {
    /// `--kube.dra` on unless told otherwise.
    pub kube_dra: bool,
    /// `--kube.node-name`'s default, in place of $NODE_NAME or the hostname.
    pub node_name: Option<String>,
}

/// Subcommands beside the exporter itself.
#[derive(Debug, clap::Subcommand)]
pub enum Command {
    /// Recommend a GPU sharing strategy per workload from Prometheus history.
    Advise(crate::advise::AdviseArgs),
    /// Copy the CUDA probe library shipped beside this binary into DIR (for workload pods).
    InstallProbe {
        /// Host directory to install libtessera_probe.so into.
        dir: PathBuf,
    },
}

/// clap's "a similar argument exists" may name a hidden flag (`--no-kube.dra` for `--no-kube.dr`); a
/// newcomer then types a spelling the help never showed. Such an error is rebuilt without the
/// tip; every other error passes through unchanged.
fn without_hidden_suggestion(e: clap::Error, command: &clap::Command) -> clap::Error {
    use clap::error::{ContextKind, ContextValue, ErrorKind};
    if e.kind() != ErrorKind::UnknownArgument {
        return e;
    }
    let hidden = |name: &str| {
        let long = name.trim_start_matches('-');
        command
            .get_arguments()
            .any(|a| a.is_hide_set() && a.get_long() == Some(long))
    };
    let suggests_hidden = e.context().any(|(kind, value)| {
        kind == ContextKind::SuggestedArg
            && match value {
                ContextValue::String(s) => hidden(s),
                ContextValue::Strings(v) => v.iter().any(|s| hidden(s)),
                _ => false,
            }
    });
    if !suggests_hidden {
        return e;
    }
    let mut out = clap::Error::new(ErrorKind::UnknownArgument).with_cmd(command);
    for (kind, value) in e.context() {
        if kind != ContextKind::SuggestedArg && kind != ContextKind::Suggested {
            out.insert(kind, value.clone());
        }
    }
    out
}

impl<X: BinaryFlags> Cli<X> {
    /// The command line `--help` shows: every flag, as the binary's flags finish it.
    pub fn full_command() -> clap::Command {
        X::finish(Self::command())
    }

    /// Parses `args` (and the `TESSERA_*` environment) and records which values came from the
    /// environment; `try_parse_from` works too but reports every value as a flag.
    pub fn parse_args<I, T>(args: I) -> Result<Self, clap::Error>
    where
        I: IntoIterator<Item = T>,
        T: Into<std::ffi::OsString> + Clone,
    {
        let command = Self::full_command();
        let matches = command
            .clone()
            .try_get_matches_from(args)
            .map_err(|e| without_hidden_suggestion(e, &command))?;
        let mut cli = Self::from_arg_matches(&matches)?;
        for arg in command.get_arguments() {
            let (Some(long), Some(env)) = (arg.get_long(), arg.get_env()) else {
                continue;
            };
            if matches.value_source(arg.get_id().as_str()) == Some(ValueSource::EnvVariable) {
                cli.from_env
                    .insert(long.to_owned(), env.to_string_lossy().into_owned());
            }
        }
        Ok(cli)
    }
}

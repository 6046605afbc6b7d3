//! The command line: every setting as a flag with its `TESSERA_*` environment mirror, taken as
//! text so that `Settings::resolve` can validate them all together.

use std::collections::BTreeMap;
use std::path::PathBuf;

use clap::parser::ValueSource;
use clap::{CommandFactory, FromArgMatches, Parser};

/// Values are taken as text and validated together, so one run reports every mistake.
#[derive(Debug, Default, Parser)]
#[command(
    name = "tessera",
    version,
    about = "GPU node exporter for shared GPUs: per-pod attribution and sharing-mode labels"
)]
pub struct Cli {
    /// YAML file with any of the settings below, keyed by flag name (e.g. `sample.interval: 2s`).
    #[arg(long = "config.file", env = "TESSERA_CONFIG_FILE")]
    pub config_file: Option<PathBuf>,
    /// Serve a built-in 9-GPU H100 node (fake NVML, kubelet and pods) instead of real GPUs.
    #[arg(long = "demo", env = "TESSERA_DEMO", value_name = "BOOL", num_args = 0..=1,
          require_equals = true, default_missing_value = "true", overrides_with = "no_demo")]
    pub demo: Option<String>,
    #[arg(long = "no-demo", hide = true, overrides_with = "demo")]
    pub no_demo: bool,
    /// Run the demo as node N of a simulated fleet: its node name, cluster, sharing mix and
    /// load are derived from N (0 to 99999); needs --demo [default: none].
    #[arg(
        long = "demo.fleet-node",
        env = "TESSERA_DEMO_FLEET_NODE",
        value_name = "N"
    )]
    pub demo_fleet_node: Option<String>,
    /// Print docs/metrics.md (generated from the metric table) and exit.
    #[arg(long = "print-metrics-doc", hide = true)]
    pub print_metrics_doc: bool,
    /// Address to serve /metrics on [default: 0.0.0.0:9949].
    #[arg(long = "web.listen-address", env = "TESSERA_WEB_LISTEN_ADDRESS")]
    pub listen_address: Option<String>,
    /// A second address serving only the dcgm-exporter-compatible families at /metrics (e.g.
    /// `:9400`), for tools that find dcgm-exporter by its port; needs --metrics.dcgm-compat [default: none].
    #[arg(
        long = "web.dcgm-listen-address",
        env = "TESSERA_WEB_DCGM_LISTEN_ADDRESS"
    )]
    pub dcgm_listen_address: Option<String>,
    /// Web config file (Prometheus exporter-toolkit format): TLS and basic auth, reloaded on change [default: none].
    #[arg(long = "web.config.file", env = "TESSERA_WEB_CONFIG_FILE")]
    pub web_config_file: Option<String>,
    /// Serve /debug/attribution [default: false].
    #[arg(long = "web.enable-debug", env = "TESSERA_WEB_ENABLE_DEBUG", value_name = "BOOL", num_args = 0..=1,
          require_equals = true, default_missing_value = "true", overrides_with = "no_enable_debug")]
    pub enable_debug: Option<String>,
    #[arg(
        long = "no-web.enable-debug",
        hide = true,
        overrides_with = "enable_debug"
    )]
    pub no_enable_debug: bool,
    /// How often to sample NVML and rebuild the snapshot [default: 1s].
    #[arg(long = "sample.interval", env = "TESSERA_SAMPLE_INTERVAL")]
    pub sample_interval: Option<String>,
    /// Path of libnvidia-ml.so [default: the system's libnvidia-ml.so.1].
    #[arg(long = "nvml.library", env = "TESSERA_NVML_LIBRARY")]
    pub nvml_library: Option<String>,
    /// Cadence of slow NVML calls: energy counter and MIG mode [default: 10s].
    #[arg(long = "nvml.slow-interval", env = "TESSERA_NVML_SLOW_INTERVAL")]
    pub nvml_slow_interval: Option<String>,
    /// Cadence of per-process utilization, NVML's costliest call; a new process is read at
    /// once [default: 5s].
    #[arg(long = "nvml.process-interval", env = "TESSERA_NVML_PROCESS_INTERVAL")]
    pub nvml_process_interval: Option<String>,
    /// How long a sample waits for a GPU before reporting it down (a hung NVML call) [default: 2s].
    #[arg(long = "nvml.timeout", env = "TESSERA_NVML_TIMEOUT")]
    pub nvml_timeout: Option<String>,
    /// The host's procfs (NVML reports host PIDs) [default: /proc].
    #[arg(long = "path.procfs", env = "TESSERA_PATH_PROCFS")]
    pub procfs: Option<String>,
    /// Read per-process figures from NVML, what per-container attribution is made of (their own series need --metrics.detail=full) [default: true].
    #[arg(long = "collect.processes", env = "TESSERA_COLLECT_PROCESSES", value_name = "BOOL", num_args = 0..=1,
          require_equals = true, default_missing_value = "true", overrides_with = "no_collect_processes")]
    pub collect_processes: Option<String>,
    #[arg(
        long = "no-collect.processes",
        hide = true,
        overrides_with = "collect_processes"
    )]
    pub no_collect_processes: bool,
    /// Per-MIG-instance series [default: true].
    #[arg(long = "collect.mig", env = "TESSERA_COLLECT_MIG", value_name = "BOOL", num_args = 0..=1,
          require_equals = true, default_missing_value = "true", overrides_with = "no_collect_mig")]
    pub collect_mig: Option<String>,
    #[arg(long = "no-collect.mig", hide = true, overrides_with = "collect_mig")]
    pub no_collect_mig: bool,
    /// Read GPM (SM, tensor and DRAM activity, NVLink and PCIe rates); turn it off where DCGM's profiling module must own the counters [default: true].
    #[arg(long = "collect.gpm", env = "TESSERA_COLLECT_GPM", value_name = "BOOL", num_args = 0..=1,
          require_equals = true, default_missing_value = "true", overrides_with = "no_collect_gpm")]
    pub collect_gpm: Option<String>,
    #[arg(long = "no-collect.gpm", hide = true, overrides_with = "collect_gpm")]
    pub no_collect_gpm: bool,
    /// Where NVML runs: `process` (a worker process per GPU, restarted if the driver library crashes: a fault costs that GPU's samples, never the exporter) or `thread` (in the exporter itself) [default: process].
    #[arg(long = "nvml.isolation", env = "TESSERA_NVML_ISOLATION")]
    pub nvml_isolation: Option<String>,
    /// Longest label value kept; longer ones are cut and counted [default: 256].
    #[arg(
        long = "metrics.max-label-value-length",
        env = "TESSERA_METRICS_MAX_LABEL_VALUE_LENGTH"
    )]
    pub max_label_value_len: Option<String>,
    /// Most per-container and per-process series per scrape; the rest are dropped and counted [default: 20000].
    #[arg(long = "metrics.max-series", env = "TESSERA_METRICS_MAX_SERIES")]
    pub max_series: Option<String>,
    /// `default`: what tessera's alerts, rules, dashboards and advisor read, and GPU health; `full`: also per-process families, occupancy, DRAM bandwidth, energy, encoder/decoder, row-remap counts, withheld-share gauges and informational clock reasons (docs/metrics.md) [default: default].
    #[arg(long = "metrics.detail", env = "TESSERA_METRICS_DETAIL")]
    pub metrics_detail: Option<String>,
    /// Also serve dcgm-exporter's families (DCGM_FI_*), split per tenant on shared GPUs [default: false].
    #[arg(long = "metrics.dcgm-compat", env = "TESSERA_METRICS_DCGM_COMPAT", value_name = "BOOL", num_args = 0..=1,
          require_equals = true, default_missing_value = "true", overrides_with = "no_dcgm_compat")]
    pub dcgm_compat: Option<String>,
    #[arg(
        long = "no-metrics.dcgm-compat",
        hide = true,
        overrides_with = "dcgm_compat"
    )]
    pub no_dcgm_compat: bool,
    /// This node's name, for the `node` label and the pod watch [default: $NODE_NAME, else the hostname].
    #[arg(long = "kube.node-name", env = "TESSERA_KUBE_NODE_NAME")]
    pub node_name: Option<String>,
    /// Read allocations from the kubelet's pod-resources API [default: true].
    #[arg(long = "kubelet.enabled", env = "TESSERA_KUBELET_ENABLED", value_name = "BOOL", num_args = 0..=1,
          require_equals = true, default_missing_value = "true", overrides_with = "no_kubelet_enabled")]
    pub kubelet_enabled: Option<String>,
    #[arg(
        long = "no-kubelet.enabled",
        hide = true,
        overrides_with = "kubelet_enabled"
    )]
    pub no_kubelet_enabled: bool,
    /// The kubelet's pod-resources socket [default: /var/lib/kubelet/pod-resources/kubelet.sock].
    #[arg(
        long = "kubelet.pod-resources-socket",
        env = "TESSERA_KUBELET_POD_RESOURCES_SOCKET"
    )]
    pub pod_resources_socket: Option<String>,
    /// How often to poll pod-resources (the kubelet rate-limits it; at least 1s) [default: 5s].
    #[arg(long = "kubelet.poll-interval", env = "TESSERA_KUBELET_POLL_INTERVAL")]
    pub kubelet_poll_interval: Option<String>,
    /// Extra resource names that are GPUs, comma-separated, besides nvidia.com/gpu, nvidia.com/gpu.shared and nvidia.com/mig-<profile>[.shared].
    #[arg(long = "kubelet.resource-name", env = "TESSERA_KUBELET_RESOURCE_NAME")]
    pub resource_names: Option<String>,
    /// Watch this node's pods and labels through the API server (in-cluster config or kubeconfig) [default: true].
    #[arg(long = "kube.enabled", env = "TESSERA_KUBE_ENABLED", value_name = "BOOL", num_args = 0..=1,
          require_equals = true, default_missing_value = "true", overrides_with = "no_kube_enabled")]
    pub kube_enabled: Option<String>,
    #[arg(long = "no-kube.enabled", hide = true, overrides_with = "kube_enabled")]
    pub no_kube_enabled: bool,
    /// Pod labels copied onto container series as label_<name>, comma-separated [default: none].
    #[arg(long = "kube.pod-labels", env = "TESSERA_KUBE_POD_LABELS")]
    pub pod_labels: Option<String>,
    /// Resolve DRA allocations through ResourceSlices and read the pods' ResourceClaims [default: false; true with --demo].
    #[arg(long = "kube.dra", env = "TESSERA_KUBE_DRA", value_name = "BOOL", num_args = 0..=1,
          require_equals = true, default_missing_value = "true", overrides_with = "no_kube_dra")]
    pub kube_dra: Option<String>,
    #[arg(long = "no-kube.dra", hide = true, overrides_with = "kube_dra")]
    pub no_kube_dra: bool,
    /// Listen on this UNIX socket for the CUDA probe's per-process kernel busy time (e.g. /run/tessera/probe.sock) [default: off].
    #[arg(long = "probe.socket", env = "TESSERA_PROBE_SOCKET")]
    pub probe_socket: Option<String>,
    /// Trailing window over which process CPU time and probe busy time are measured [default: 5s].
    #[arg(long = "activity.window", env = "TESSERA_ACTIVITY_WINDOW")]
    pub activity_window: Option<String>,
    /// Log level: error, warn, info, debug, trace [default: info].
    #[arg(long = "log.level", env = "TESSERA_LOG_LEVEL")]
    pub log_level: Option<String>,
    /// Log format: text or json [default: text].
    #[arg(long = "log.format", env = "TESSERA_LOG_FORMAT")]
    pub log_format: Option<String>,
    /// Flags whose value came from their environment mirror, with the variable's name, so an
    /// invalid value names where it was set. Filled by [`Cli::parse_args`].
    #[arg(skip)]
    pub from_env: BTreeMap<String, String>,
    #[command(subcommand)]
    pub command: Option<Command>,
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

/// clap's "a similar argument exists" may name a hidden flag (`--no-demo` for `--dem`); a
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

impl Cli {
    /// Parses `args` (and the `TESSERA_*` environment) and records which values came from the
    /// environment; `try_parse_from` works too but reports every value as a flag.
    pub fn parse_args<I, T>(args: I) -> Result<Cli, clap::Error>
    where
        I: IntoIterator<Item = T>,
        T: Into<std::ffi::OsString> + Clone,
    {
        let command = Cli::command();
        let matches = command
            .clone()
            .try_get_matches_from(args)
            .map_err(|e| without_hidden_suggestion(e, &command))?;
        let mut cli = Cli::from_arg_matches(&matches)?;
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

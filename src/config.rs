//! Flags, their `TESSERA_*` environment mirrors and an optional YAML file, resolved into typed
//! settings. Every invalid value is reported (one line each); the caller exits with code 2.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use clap::parser::ValueSource;
use clap::{CommandFactory, FromArgMatches, Parser};

/// Default port: free of dcgm-exporter (9400) and nvidia_gpu_exporter (9835).
pub const DEFAULT_LISTEN: &str = "0.0.0.0:9949";
pub const DEFAULT_POD_RESOURCES_SOCKET: &str = "/var/lib/kubelet/pod-resources/kubelet.sock";

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
    /// Serve a built-in 8-GPU H100 node (fake NVML, kubelet and pods) instead of real GPUs.
    #[arg(long = "demo", env = "TESSERA_DEMO", value_name = "BOOL", num_args = 0..=1,
          require_equals = true, default_missing_value = "true", overrides_with = "no_demo")]
    pub demo: Option<String>,
    #[arg(long = "no-demo", hide = true, overrides_with = "demo")]
    pub no_demo: bool,
    /// Print docs/metrics.md (generated from the metric table) and exit.
    #[arg(long = "print-metrics-doc", hide = true)]
    pub print_metrics_doc: bool,
    /// Address to serve /metrics on [default: 0.0.0.0:9949].
    #[arg(long = "web.listen-address", env = "TESSERA_WEB_LISTEN_ADDRESS")]
    pub listen_address: Option<String>,
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
    /// Per-process series [default: true].
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
    /// Longest label value kept; longer ones are cut and counted [default: 256].
    #[arg(
        long = "metrics.max-label-value-length",
        env = "TESSERA_METRICS_MAX_LABEL_VALUE_LENGTH"
    )]
    pub max_label_value_len: Option<String>,
    /// Most per-container and per-process series per scrape; the rest are dropped and counted [default: 20000].
    #[arg(long = "metrics.max-series", env = "TESSERA_METRICS_MAX_SERIES")]
    pub max_series: Option<String>,
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

impl Cli {
    /// Parses `args` (and the `TESSERA_*` environment) and records which values came from the
    /// environment; `try_parse_from` works too but reports every value as a flag.
    pub fn parse_args<I, T>(args: I) -> Result<Cli, clap::Error>
    where
        I: IntoIterator<Item = T>,
        T: Into<std::ffi::OsString> + Clone,
    {
        let command = Cli::command();
        let matches = command.clone().try_get_matches_from(args)?;
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

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LogFormat {
    Text,
    Json,
}

#[derive(Debug, Clone)]
pub struct Settings {
    pub demo: bool,
    pub listen_address: SocketAddr,
    pub enable_debug: bool,
    pub web_config_file: Option<PathBuf>,
    pub sample_interval: Duration,
    pub nvml_library: Option<PathBuf>,
    pub nvml_slow_interval: Duration,
    pub nvml_process_interval: Duration,
    pub nvml_timeout: Duration,
    pub procfs: PathBuf,
    pub collect_processes: bool,
    pub collect_mig: bool,
    pub max_label_value_len: usize,
    pub max_series: usize,
    pub node_name: String,
    pub kubelet_enabled: bool,
    pub pod_resources_socket: PathBuf,
    pub kubelet_poll_interval: Duration,
    pub resource_names: Vec<String>,
    pub kube_enabled: bool,
    pub pod_labels: Vec<String>,
    pub kube_dra: bool,
    pub probe_socket: Option<PathBuf>,
    pub activity_window: Duration,
    pub log_level: tracing::Level,
    pub log_format: LogFormat,
}

#[derive(Debug, thiserror::Error, PartialEq)]
pub enum ConfigError {
    #[error("cannot read config file {path}: {reason}")]
    File { path: String, reason: String },
    #[error("config file {path}: unknown setting `{key}`")]
    UnknownKey { path: String, key: String },
    #[error("{}: {reason} (got {value:?})", .origin.describe(flag))]
    Invalid {
        flag: &'static str,
        origin: Origin,
        value: String,
        reason: String,
    },
}

/// Where a setting's value was written, so its error message points there.
#[derive(Debug, Clone, PartialEq)]
pub enum Origin {
    Flag,
    Env(String),
    File(String),
}

impl Origin {
    fn describe(&self, flag: &str) -> String {
        match self {
            Origin::Flag => format!("--{flag}"),
            Origin::Env(var) => format!("environment variable {var} (--{flag})"),
            Origin::File(path) => format!("config file {path}: {flag}"),
        }
    }
}

/// Parses "1s", "500ms", "2m", "1h" (one number, one unit).
pub fn parse_duration(s: &str) -> Result<Duration, String> {
    let s = s.trim();
    let split = s
        .find(|c: char| !c.is_ascii_digit() && c != '.')
        .unwrap_or(s.len());
    let (num, unit) = s.split_at(split);
    let n: f64 = num
        .parse()
        .map_err(|_| "expected a duration such as 1s, 500ms or 2m".to_owned())?;
    let secs = match unit {
        "ms" => n / 1000.0,
        "s" => n,
        "m" => n * 60.0,
        "h" => n * 3600.0,
        _ => return Err("unit must be ms, s, m or h".into()),
    };
    Duration::try_from_secs_f64(secs).map_err(|_| "out of range".into())
}

/// The spellings users write booleans in, in flags, environment variables and YAML alike.
pub fn parse_bool(s: &str) -> Result<bool, String> {
    match s.trim().to_ascii_lowercase().as_str() {
        "true" | "1" | "yes" | "on" => Ok(true),
        "false" | "0" | "no" | "off" => Ok(false),
        _ => Err("expected true or false (or 1/0, yes/no, on/off)".into()),
    }
}

/// Settings from the YAML file, as text, keyed by flag name.
fn read_file(path: &std::path::Path, errors: &mut Vec<ConfigError>) -> BTreeMap<String, String> {
    let shown = path.display().to_string();
    let text = match std::fs::read_to_string(path) {
        Ok(t) => t,
        Err(e) => {
            errors.push(ConfigError::File {
                path: shown,
                reason: e.to_string(),
            });
            return BTreeMap::new();
        }
    };
    let map: BTreeMap<String, serde_yaml::Value> =
        match serde_yaml::from_str::<Option<BTreeMap<String, serde_yaml::Value>>>(&text) {
            Ok(m) => m.unwrap_or_default(),
            Err(e) => {
                errors.push(ConfigError::File {
                    path: shown,
                    reason: e.to_string(),
                });
                return BTreeMap::new();
            }
        };
    map.into_iter()
        .map(|(k, v)| {
            let text = match v {
                serde_yaml::Value::String(s) => s,
                serde_yaml::Value::Bool(b) => b.to_string(),
                serde_yaml::Value::Number(n) => n.to_string(),
                serde_yaml::Value::Sequence(items) => items
                    .iter()
                    .filter_map(|i| i.as_str().map(str::to_owned))
                    .collect::<Vec<_>>()
                    .join(","),
                _ => String::new(),
            };
            (k, text)
        })
        .collect()
}

struct Resolver<'a> {
    file: BTreeMap<String, String>,
    file_path: String,
    from_env: &'a BTreeMap<String, String>,
    errors: &'a mut Vec<ConfigError>,
}

impl Resolver<'_> {
    /// Flag (or env) first, then the file, then the default; invalid values are recorded and
    /// the default stands in so validation can go on.
    fn get<T>(
        &mut self,
        flag: &'static str,
        cli: &Option<String>,
        default: T,
        parse: impl Fn(&str) -> Result<T, String>,
    ) -> T {
        let from_file = self.file.remove(flag);
        let raw = match (cli, from_file) {
            (Some(v), _) => Some((v.clone(), self.cli_origin(flag))),
            (None, Some(v)) => Some((v, Origin::File(self.file_path.clone()))),
            (None, None) => None,
        };
        match raw {
            None => default,
            Some((v, origin)) => self.parse(flag, origin, v, default, parse),
        }
    }

    /// A boolean setting: `--no-<flag>` turns it off and wins over the environment.
    fn get_bool(
        &mut self,
        flag: &'static str,
        cli: &Option<String>,
        no: bool,
        default: bool,
    ) -> bool {
        if no {
            self.file.remove(flag);
            return false;
        }
        self.get(flag, cli, default, parse_bool)
    }

    fn cli_origin(&self, flag: &str) -> Origin {
        match self.from_env.get(flag) {
            Some(var) => Origin::Env(var.clone()),
            None => Origin::Flag,
        }
    }

    fn parse<T>(
        &mut self,
        flag: &'static str,
        origin: Origin,
        value: String,
        default: T,
        parse: impl Fn(&str) -> Result<T, String>,
    ) -> T {
        match parse(&value) {
            Ok(t) => t,
            Err(reason) => {
                self.errors.push(ConfigError::Invalid {
                    flag,
                    origin,
                    value,
                    reason,
                });
                default
            }
        }
    }
}

fn positive(d: Duration) -> Result<Duration, String> {
    if d.is_zero() {
        Err("must be greater than zero".into())
    } else {
        Ok(d)
    }
}

impl Settings {
    pub fn resolve(cli: &Cli) -> Result<Settings, Vec<ConfigError>> {
        let mut errors = Vec::new();
        let file = match &cli.config_file {
            Some(p) => read_file(p, &mut errors),
            None => BTreeMap::new(),
        };
        let file_path = cli
            .config_file
            .as_ref()
            .map(|p| p.display().to_string())
            .unwrap_or_default();
        let mut r = Resolver {
            file,
            file_path: file_path.clone(),
            from_env: &cli.from_env,
            errors: &mut errors,
        };
        // Flag or environment only: a config file must not turn a real node into a simulated one.
        let demo = match &cli.demo {
            Some(v) if !cli.no_demo => {
                let origin = r.cli_origin("demo");
                r.parse("demo", origin, v.clone(), false, parse_bool)
            }
            _ => false,
        };
        let listen_address = r.get(
            "web.listen-address",
            &cli.listen_address,
            default_listen(),
            |s| {
                // `:9949` means every address, as in Prometheus exporters' flags.
                let full = if s.starts_with(':') {
                    format!("0.0.0.0{s}")
                } else {
                    s.to_owned()
                };
                full.parse::<SocketAddr>()
                    .map_err(|_| "expected host:port or :port, e.g. 0.0.0.0:9949".into())
            },
        );
        let enable_debug = r.get_bool(
            "web.enable-debug",
            &cli.enable_debug,
            cli.no_enable_debug,
            false,
        );
        let web_config_file = r.get("web.config.file", &cli.web_config_file, None, |s| {
            if s.is_empty() {
                Err("must not be empty".into())
            } else {
                Ok(Some(PathBuf::from(s)))
            }
        });
        let sample_interval = r.get(
            "sample.interval",
            &cli.sample_interval,
            Duration::from_secs(1),
            |s| parse_duration(s).and_then(positive),
        );
        let nvml_library = r.get("nvml.library", &cli.nvml_library, None, |s| {
            Ok(Some(PathBuf::from(s)))
        });
        let nvml_slow_interval = r.get(
            "nvml.slow-interval",
            &cli.nvml_slow_interval,
            Duration::from_secs(10),
            |s| parse_duration(s).and_then(positive),
        );
        let nvml_process_interval = r.get(
            "nvml.process-interval",
            &cli.nvml_process_interval,
            Duration::from_secs(5),
            |s| parse_duration(s).and_then(positive),
        );
        let nvml_timeout = r.get(
            "nvml.timeout",
            &cli.nvml_timeout,
            Duration::from_secs(2),
            |s| parse_duration(s).and_then(positive),
        );
        let procfs = r.get("path.procfs", &cli.procfs, PathBuf::from("/proc"), |s| {
            Ok(PathBuf::from(s))
        });
        let collect_processes = r.get_bool(
            "collect.processes",
            &cli.collect_processes,
            cli.no_collect_processes,
            true,
        );
        let collect_mig = r.get_bool("collect.mig", &cli.collect_mig, cli.no_collect_mig, true);
        let max_label_value_len = r.get(
            "metrics.max-label-value-length",
            &cli.max_label_value_len,
            256,
            |s| match s.trim().parse::<usize>() {
                Ok(n) if (16..=65536).contains(&n) => Ok(n),
                _ => Err("expected a whole number from 16 to 65536".into()),
            },
        );
        let max_series = r.get("metrics.max-series", &cli.max_series, 20_000, |s| {
            match s.trim().parse::<usize>() {
                Ok(n) if n >= 1 => Ok(n),
                _ => Err("expected a whole number of at least 1".into()),
            }
        });
        let node_name = r.get("kube.node-name", &cli.node_name, default_node_name(), |s| {
            if s.is_empty() || s.len() > 253 {
                Err("must be 1 to 253 characters".into())
            } else {
                Ok(s.to_owned())
            }
        });
        let kubelet_enabled = r.get_bool(
            "kubelet.enabled",
            &cli.kubelet_enabled,
            cli.no_kubelet_enabled,
            true,
        );
        let pod_resources_socket = r.get(
            "kubelet.pod-resources-socket",
            &cli.pod_resources_socket,
            PathBuf::from(DEFAULT_POD_RESOURCES_SOCKET),
            |s| {
                if s.is_empty() {
                    Err("must not be empty".into())
                } else {
                    Ok(PathBuf::from(s))
                }
            },
        );
        let kubelet_poll_interval = r.get(
            "kubelet.poll-interval",
            &cli.kubelet_poll_interval,
            Duration::from_secs(5),
            |s| {
                let d = parse_duration(s)?;
                if d < Duration::from_secs(1) {
                    Err("must be at least 1s: the kubelet rate-limits this socket".into())
                } else {
                    Ok(d)
                }
            },
        );
        let resource_names = r.get(
            "kubelet.resource-name",
            &cli.resource_names,
            Vec::new(),
            |s| Ok(split_list(s)),
        );
        let kube_enabled = r.get_bool("kube.enabled", &cli.kube_enabled, cli.no_kube_enabled, true);
        let pod_labels = r.get("kube.pod-labels", &cli.pod_labels, Vec::new(), |s| {
            let labels = split_list(s);
            match labels
                .iter()
                .find(|l| l.len() > 317 || l.contains(char::is_whitespace))
            {
                Some(bad) => Err(format!("{bad:?} is not a Kubernetes label name")),
                None => Ok(labels),
            }
        });
        // The demo's GPU 8 is shared through a DRA claim: on by default there, still switchable.
        let kube_dra = r.get_bool("kube.dra", &cli.kube_dra, cli.no_kube_dra, demo);
        let probe_socket = r.get("probe.socket", &cli.probe_socket, None, |s| {
            Ok(Some(PathBuf::from(s)))
        });
        let activity_window = r.get(
            "activity.window",
            &cli.activity_window,
            Duration::from_secs(5),
            |s| {
                let d = parse_duration(s)?;
                if d < Duration::from_secs(2) {
                    Err("must be at least 2s: CPU time is counted in 10 ms ticks".into())
                } else {
                    Ok(d)
                }
            },
        );
        let log_level = r.get("log.level", &cli.log_level, tracing::Level::INFO, |s| {
            s.parse()
                .map_err(|_| "expected error, warn, info, debug or trace".into())
        });
        let log_format = r.get(
            "log.format",
            &cli.log_format,
            LogFormat::Text,
            |s| match s {
                "text" => Ok(LogFormat::Text),
                "json" => Ok(LogFormat::Json),
                _ => Err("expected text or json".into()),
            },
        );
        for key in std::mem::take(&mut r.file).into_keys() {
            r.errors.push(ConfigError::UnknownKey {
                path: file_path.clone(),
                key,
            });
        }
        if !errors.is_empty() {
            return Err(errors);
        }
        Ok(Settings {
            demo,
            listen_address,
            enable_debug,
            web_config_file,
            sample_interval,
            nvml_library,
            nvml_slow_interval,
            nvml_process_interval,
            nvml_timeout,
            procfs,
            collect_processes,
            collect_mig,
            max_label_value_len,
            max_series,
            node_name,
            kubelet_enabled,
            pod_resources_socket,
            kubelet_poll_interval,
            resource_names,
            kube_enabled,
            pod_labels,
            kube_dra,
            probe_socket,
            activity_window,
            log_level,
            log_format,
        })
    }
}

fn split_list(s: &str) -> Vec<String> {
    s.split(',')
        .map(str::trim)
        .filter(|x| !x.is_empty())
        .map(str::to_owned)
        .collect()
}

fn default_listen() -> SocketAddr {
    SocketAddr::from(([0, 0, 0, 0], 9949))
}

fn default_node_name() -> String {
    if let Ok(n) = std::env::var("NODE_NAME") {
        if !n.is_empty() {
            return n;
        }
    }
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|h| h.trim().to_owned())
        .ok()
        .filter(|h| !h.is_empty())
        .unwrap_or_else(|| "unknown".into())
}

#[cfg(test)]
#[path = "config_tests.rs"]
mod tests;

//! Flags, their `TESSERA_*` environment mirrors and an optional YAML file, resolved into typed
//! settings. Every invalid value is reported (one line each); the caller exits with code 2.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

mod cli;

pub use cli::{Cli, Command};

/// Default port: free of dcgm-exporter (9400) and nvidia_gpu_exporter (9835).
pub const DEFAULT_LISTEN: &str = "0.0.0.0:9949";
pub const DEFAULT_POD_RESOURCES_SOCKET: &str = "/var/lib/kubelet/pod-resources/kubelet.sock";

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LogFormat {
    Text,
    Json,
}

#[derive(Debug, Clone)]
pub struct Settings {
    pub demo: bool,
    /// `--demo.fleet-node`: the demo runs as this node of a simulated fleet.
    pub demo_fleet_node: Option<u32>,
    pub listen_address: SocketAddr,
    /// Second listener serving only the dcgm-exporter-compatible families.
    pub dcgm_listen_address: Option<SocketAddr>,
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
    pub collect_gpm: bool,
    pub nvml_isolation: crate::source::nvml::Isolation,
    pub max_label_value_len: usize,
    pub max_series: usize,
    pub dcgm_compat: bool,
    pub metrics_detail: crate::metrics::Detail,
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
    /// Settings that are valid alone but not together.
    #[error("{reason}")]
    Conflict { reason: String },
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
        let demo_fleet_node = r.get("demo.fleet-node", &cli.demo_fleet_node, None, |s| {
            crate::demo::fleet::parse_index(s).map(Some)
        });
        if let (Some(n), false) = (demo_fleet_node, demo) {
            r.errors.push(ConfigError::Conflict {
                reason: format!(
                    "--demo.fleet-node ({n}) runs the demo as a fleet member; it needs --demo"
                ),
            });
        }
        let listen_address = r.get(
            "web.listen-address",
            &cli.listen_address,
            default_listen(),
            parse_listen,
        );
        let dcgm_listen_address = r.get(
            "web.dcgm-listen-address",
            &cli.dcgm_listen_address,
            None,
            |s| parse_listen(s).map(Some),
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
        let collect_gpm = r.get_bool("collect.gpm", &cli.collect_gpm, cli.no_collect_gpm, true);
        let nvml_isolation = r.get(
            "nvml.isolation",
            &cli.nvml_isolation,
            crate::source::nvml::Isolation::Process,
            |s| match s.trim() {
                "process" => Ok(crate::source::nvml::Isolation::Process),
                "thread" => Ok(crate::source::nvml::Isolation::Thread),
                _ => Err("expected `process` or `thread`".into()),
            },
        );
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
        let metrics_detail = r.get(
            "metrics.detail",
            &cli.metrics_detail,
            crate::metrics::Detail::Default,
            |s| match s.trim() {
                "default" => Ok(crate::metrics::Detail::Default),
                "full" => Ok(crate::metrics::Detail::Full),
                _ => Err("expected default or full".into()),
            },
        );
        let dcgm_compat = r.get_bool(
            "metrics.dcgm-compat",
            &cli.dcgm_compat,
            cli.no_dcgm_compat,
            false,
        );
        if let (Some(addr), false) = (dcgm_listen_address, dcgm_compat) {
            r.errors.push(ConfigError::Conflict {
                reason: format!(
                    "--web.dcgm-listen-address ({addr}) serves the dcgm-exporter-compatible families; it needs --metrics.dcgm-compat=true"
                ),
            });
        }
        if dcgm_listen_address == Some(listen_address) {
            r.errors.push(ConfigError::Conflict {
                reason: format!(
                    "--web.dcgm-listen-address and --web.listen-address are both {listen_address}"
                ),
            });
        }
        // A fleet member is named after its index unless told otherwise.
        let node_default = match demo_fleet_node {
            Some(n) => crate::demo::fleet::FleetNode::new(n).node_name(),
            None => default_node_name(),
        };
        let node_name = r.get("kube.node-name", &cli.node_name, node_default, |s| {
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
            demo_fleet_node,
            listen_address,
            dcgm_listen_address,
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
            collect_gpm,
            nvml_isolation,
            max_label_value_len,
            max_series,
            dcgm_compat,
            metrics_detail,
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

/// `:9949` means every address, as in Prometheus exporters' flags.
fn parse_listen(s: &str) -> Result<SocketAddr, String> {
    let full = if s.starts_with(':') {
        format!("0.0.0.0{s}")
    } else {
        s.to_owned()
    };
    full.parse::<SocketAddr>()
        .map_err(|_| "expected host:port or :port, e.g. 0.0.0.0:9949".into())
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
mod tests;

//! Flags, their `TESSERA_*` environment mirrors and an optional YAML file, resolved into typed
//! settings. Each component declares and validates its own flags (its `*Args`); this module
//! gathers them into one command line and one [`Settings`], and checks the settings that are
//! valid alone but not together. Every invalid value is reported (one line each); the caller
//! exits with code 2.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

mod cli;
mod demo;
mod doc;

pub use crate::log::LogFormat;
pub use crate::options::{parse_bool, parse_duration, ConfigError, Origin};
pub use crate::web::DEFAULT_LISTEN;
pub use cli::{Cli, Command};
pub use demo::{DemoArgs, NO_DEMO};
pub use doc::markdown_reference;

use crate::options::Resolver;

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

impl Settings {
    pub fn resolve(cli: &Cli) -> Result<Settings, Vec<ConfigError>> {
        let mut r = Resolver::new(cli.config_file.as_deref(), &cli.from_env);
        let demo = cli.demo.demo(&mut r);
        let demo_fleet_node = cli.demo.fleet_node(&mut r, demo);
        let settings = Settings {
            demo,
            demo_fleet_node,
            listen_address: cli.web.listen_address(&mut r),
            dcgm_listen_address: cli.web.dcgm_listen_address(&mut r),
            enable_debug: cli.web.enable_debug(&mut r),
            web_config_file: cli.web.web_config_file(&mut r),
            sample_interval: cli.sample.interval(&mut r),
            nvml_library: cli.nvml.library(&mut r),
            nvml_slow_interval: cli.nvml.slow_interval(&mut r),
            nvml_process_interval: cli.nvml.process_interval(&mut r),
            nvml_timeout: cli.nvml.timeout(&mut r),
            procfs: cli.nvml.procfs(&mut r),
            collect_processes: cli.nvml.collect_processes(&mut r),
            collect_mig: cli.nvml.collect_mig(&mut r),
            collect_gpm: cli.nvml.collect_gpm(&mut r),
            nvml_isolation: cli.nvml.isolation(&mut r),
            max_label_value_len: cli.metrics.max_label_value_len(&mut r),
            max_series: cli.metrics.max_series(&mut r),
            metrics_detail: cli.metrics.detail(&mut r),
            dcgm_compat: cli.metrics.dcgm_compat(&mut r),
            node_name: cli
                .kube
                .node_name(&mut r, DemoArgs::node_name(demo_fleet_node)),
            kubelet_enabled: cli.kubelet.enabled(&mut r),
            pod_resources_socket: cli.kubelet.socket(&mut r),
            kubelet_poll_interval: cli.kubelet.poll_interval(&mut r),
            resource_names: cli.kubelet.resource_names(&mut r),
            kube_enabled: cli.kube.enabled(&mut r),
            pod_labels: cli.kube.pod_labels(&mut r),
            kube_dra: cli.kube.dra(&mut r, demo),
            probe_socket: cli.probe.socket(&mut r),
            activity_window: cli.sample.activity_window(&mut r),
            log_level: cli.log.level(&mut r),
            log_format: cli.log.format(&mut r),
        };
        settings.check_dcgm_listener(&mut r);
        let errors = r.finish();
        if errors.is_empty() {
            Ok(settings)
        } else {
            Err(errors)
        }
    }

    /// The second listener serves what `--metrics.dcgm-compat` turns on, on a port of its own.
    fn check_dcgm_listener(&self, r: &mut Resolver) {
        let Some(addr) = self.dcgm_listen_address else {
            return;
        };
        if !self.dcgm_compat {
            r.conflict(format!(
                "--web.dcgm-listen-address ({addr}) serves the dcgm-exporter-compatible families; it needs --metrics.dcgm-compat=true"
            ));
        }
        if addr == self.listen_address {
            r.conflict(format!(
                "--web.dcgm-listen-address and --web.listen-address are both {addr}"
            ));
        }
    }
}

#[cfg(test)]
mod tests;

//! Flags, their `TESSERA_*` environment mirrors and an optional YAML file, resolved into typed
//! settings. Each component declares and validates its own flags (its `*Args`); this module
//! gathers them into one command line and one [`Settings`], and checks the settings that are
//! valid alone but not together. Every invalid value is reported (one line each); the caller
//! exits with code 2.

mod cli;
mod doc;

pub use crate::log::LogFormat;
pub use crate::options::{parse_bool, parse_duration, ConfigError, Origin};
pub use crate::web::DEFAULT_LISTEN;
pub use cli::{BinaryFlags, Cli, Command, Defaults, NoFlags};
pub use doc::markdown_reference;

use crate::log::LogOptions;
use crate::metrics::MetricsOptions;
use crate::options::Resolver;
use crate::sampler::SampleOptions;
use crate::source::nvml::NvmlOptions;
use crate::source::SourceOptions;
use crate::web::WebOptions;

/// One field per component, each the options its `*Args` resolve to (declared and validated in
/// the component's options.rs): a new setting of a component is added there, not here.
#[derive(Debug, Clone)]
pub struct Settings {
    pub web: WebOptions,
    pub sample: SampleOptions,
    pub nvml: NvmlOptions,
    pub metrics: MetricsOptions,
    /// The sources the sampler reads as feeds: the kubelet, the API server, the CUDA probe.
    pub sources: SourceOptions,
    pub log: LogOptions,
}

impl Settings {
    pub fn resolve(cli: &Cli) -> Result<Settings, Vec<ConfigError>> {
        Self::resolve_with(cli).map(|(settings, ())| settings)
    }

    /// [`resolve`](Self::resolve) with the binary's own flags, resolved first; returns their
    /// options beside the settings.
    pub fn resolve_with<X: BinaryFlags>(
        cli: &Cli<X>,
    ) -> Result<(Settings, X::Options), Vec<ConfigError>> {
        let mut r = Resolver::new(cli.config_file.as_deref(), &cli.from_env);
        let (binary, defaults) = cli.binary.resolve(&mut r);
        // In `--help` order, so several mistakes are reported in the order the help lists them.
        let settings = Settings {
            web: cli.web.resolve(&mut r),
            sample: cli.sample.resolve(&mut r),
            nvml: cli.nvml.resolve(&mut r),
            metrics: cli.metrics.resolve(&mut r),
            sources: cli
                .sources
                .resolve(&mut r, defaults.kube_dra, defaults.node_name),
            log: cli.log.resolve(&mut r),
        };
        settings.check_dcgm_listener(&mut r);
        let errors = r.finish();
        if errors.is_empty() {
            Ok((settings, binary))
        } else {
            Err(errors)
        }
    }

    /// The second listener serves what `--metrics.dcgm-compat` turns on, on a port of its own.
    fn check_dcgm_listener(&self, r: &mut Resolver) {
        let Some(addr) = self.web.dcgm_listen_address else {
            return;
        };
        if !self.metrics.dcgm_compat {
            r.conflict(format!(
                "--web.dcgm-listen-address ({addr}) serves the dcgm-exporter-compatible families; it needs --metrics.dcgm-compat=true"
            ));
        }
        if addr == self.web.listen_address {
            r.conflict(format!(
                "--web.dcgm-listen-address and --web.listen-address are both {addr}"
            ));
        }
    }
}

#[cfg(test)]
mod tests;

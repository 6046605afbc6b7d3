//! The HTTP endpoints' flags: where they listen, the web config file and the debug page.

use std::net::SocketAddr;
use std::path::PathBuf;

use crate::options::Resolver;

/// Default port: free of dcgm-exporter (9400) and nvidia_gpu_exporter (9835).
pub const DEFAULT_LISTEN: &str = "0.0.0.0:9949";

#[derive(Debug, Default, clap::Args)]
pub struct WebArgs {
    /// Address to serve /metrics on (9949 collides with neither dcgm-exporter's 9400 nor nvidia_gpu_exporter's 9835) [default: 0.0.0.0:9949].
    #[arg(long = "web.listen-address", env = "TESSERA_WEB_LISTEN_ADDRESS")]
    pub listen_address: Option<String>,
    /// A second address serving only the dcgm-exporter-compatible families at /metrics (e.g.
    /// `:9400`), for tools that find dcgm-exporter by its port, behind the same web config; needs --metrics.dcgm-compat [default: none].
    #[arg(
        long = "web.dcgm-listen-address",
        env = "TESSERA_WEB_DCGM_LISTEN_ADDRESS"
    )]
    pub dcgm_listen_address: Option<String>,
    /// Web config file (Prometheus exporter-toolkit format, docs/security.md): TLS and basic auth, reloaded on change [default: none].
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
}

/// The endpoints' resolved options.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WebOptions {
    pub listen_address: SocketAddr,
    /// Second listener serving only the dcgm-exporter-compatible families.
    pub dcgm_listen_address: Option<SocketAddr>,
    pub enable_debug: bool,
    pub config_file: Option<PathBuf>,
}

impl WebArgs {
    pub fn resolve(&self, r: &mut Resolver) -> WebOptions {
        WebOptions {
            listen_address: self.listen_address(r),
            dcgm_listen_address: self.dcgm_listen_address(r),
            enable_debug: self.enable_debug(r),
            config_file: self.web_config_file(r),
        }
    }

    fn listen_address(&self, r: &mut Resolver) -> SocketAddr {
        let default = SocketAddr::from(([0, 0, 0, 0], 9949));
        r.get(
            "web.listen-address",
            &self.listen_address,
            default,
            parse_listen,
        )
    }

    fn dcgm_listen_address(&self, r: &mut Resolver) -> Option<SocketAddr> {
        r.get(
            "web.dcgm-listen-address",
            &self.dcgm_listen_address,
            None,
            |s| parse_listen(s).map(Some),
        )
    }

    fn web_config_file(&self, r: &mut Resolver) -> Option<PathBuf> {
        r.get("web.config.file", &self.web_config_file, None, |s| {
            if s.is_empty() {
                Err("must not be empty".into())
            } else {
                Ok(Some(PathBuf::from(s)))
            }
        })
    }

    fn enable_debug(&self, r: &mut Resolver) -> bool {
        r.get_bool(
            "web.enable-debug",
            &self.enable_debug,
            self.no_enable_debug,
            false,
        )
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

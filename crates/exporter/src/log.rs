//! The exporter's own log: its flags and the subscriber they set up.

use std::io::IsTerminal;

use crate::options::Resolver;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LogFormat {
    Text,
    Json,
}

#[derive(Debug, Default, clap::Args)]
pub struct LogArgs {
    /// Log level: error, warn, info, debug, trace [default: info].
    #[arg(long = "log.level", env = "TESSERA_LOG_LEVEL")]
    pub log_level: Option<String>,
    /// Log format: text or json [default: text].
    #[arg(long = "log.format", env = "TESSERA_LOG_FORMAT")]
    pub log_format: Option<String>,
}

/// The log's resolved options.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LogOptions {
    pub level: tracing::Level,
    pub format: LogFormat,
}

impl LogArgs {
    pub fn resolve(&self, r: &mut Resolver) -> LogOptions {
        LogOptions {
            level: self.level(r),
            format: self.format(r),
        }
    }

    fn level(&self, r: &mut Resolver) -> tracing::Level {
        r.get("log.level", &self.log_level, tracing::Level::INFO, |s| {
            s.parse()
                .map_err(|_| "expected error, warn, info, debug or trace".into())
        })
    }

    fn format(&self, r: &mut Resolver) -> LogFormat {
        r.get(
            "log.format",
            &self.log_format,
            LogFormat::Text,
            |s| match s {
                "text" => Ok(LogFormat::Text),
                "json" => Ok(LogFormat::Json),
                _ => Err("expected text or json".into()),
            },
        )
    }
}

/// Logs to stderr at the options' level, as text or JSON lines.
pub fn init(options: &LogOptions) {
    let builder = tracing_subscriber::fmt()
        .with_max_level(options.level)
        .with_writer(std::io::stderr)
        // Colour codes only for a person at a terminal: not in kubectl logs, files or CI.
        .with_ansi(std::io::stderr().is_terminal() && std::env::var_os("NO_COLOR").is_none());
    match options.format {
        LogFormat::Json => builder.json().init(),
        LogFormat::Text => builder.init(),
    }
}

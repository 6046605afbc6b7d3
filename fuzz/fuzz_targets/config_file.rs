//! The YAML config file, through the real entry point: `tessera --config.file <path>`, resolved
//! with `Settings::resolve`. The input is written to one temp file per fuzzing process.
#![no_main]

use std::path::PathBuf;
use std::sync::OnceLock;

use clap::Parser as _;
use libfuzzer_sys::fuzz_target;
use tessera_exporter::config::{Cli, ConfigError, Settings};

/// Every flag the command line has, read from clap: a list written here went stale as the
/// components grew flags of their own.
fn known_flags() -> &'static Vec<String> {
    static FLAGS: OnceLock<Vec<String>> = OnceLock::new();
    FLAGS.get_or_init(|| {
        <Cli as clap::CommandFactory>::command()
            .get_arguments()
            .filter_map(|a| a.get_long().map(str::to_owned))
            .collect()
    })
}

fn config_path() -> &'static PathBuf {
    static PATH: OnceLock<PathBuf> = OnceLock::new();
    PATH.get_or_init(|| {
        std::env::temp_dir().join(format!("tessera-fuzz-config-{}.yaml", std::process::id()))
    })
}

fuzz_target!(|data: &[u8]| {
    let path = config_path();
    std::fs::write(path, data).expect("write temp config");
    let arg = path.to_str().expect("utf-8 temp path");
    let cli =
        Cli::try_parse_from(["tessera", "--config.file", arg]).expect("clap accepts the flag");
    let result = Settings::resolve(&cli);
    match &result {
        Ok(s) => {
            assert!(std::str::from_utf8(data).is_ok(), "non-UTF-8 file accepted");
            assert!(!s.sample.interval.is_zero() && !s.nvml.slow_interval.is_zero());
            assert!((16..=65536).contains(&s.metrics.max_label_value_len));
            assert!(!s.sources.kube.node_name.is_empty());
        }
        Err(errors) => {
            assert!(!errors.is_empty(), "Err with no errors");
            for e in errors {
                assert!(!e.to_string().is_empty());
                match e {
                    ConfigError::File { path: p, .. } | ConfigError::UnknownKey { path: p, .. } => {
                        assert_eq!(p, arg, "error names another file");
                    }
                    ConfigError::Invalid { flag, .. } => {
                        assert!(
                            known_flags().iter().any(|f| f == flag),
                            "unknown flag {flag:?} in {e}"
                        );
                    }
                    ConfigError::Conflict { reason } => assert!(!reason.is_empty()),
                }
                if let ConfigError::UnknownKey { key, .. } = e {
                    assert!(
                        !known_flags().contains(key),
                        "known key {key:?} reported unknown"
                    );
                }
            }
        }
    }
    // Resolving is a pure function of the file (and environment): same input, same outcome.
    let again = Settings::resolve(&cli);
    assert_eq!(
        format!("{result:?}"),
        format!("{again:?}"),
        "resolve is not deterministic"
    );
});

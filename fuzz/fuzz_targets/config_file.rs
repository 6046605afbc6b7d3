//! The YAML config file, through the real entry point: `tessera --config.file <path>`, resolved
//! with `Settings::resolve`. The input is written to one temp file per fuzzing process.
#![no_main]

use std::path::PathBuf;
use std::sync::OnceLock;

use clap::Parser as _;
use libfuzzer_sys::fuzz_target;
use tessera::config::{Cli, ConfigError, Settings};

const FLAGS: &[&str] = &[
    "web.listen-address",
    "web.enable-debug",
    "sample.interval",
    "nvml.library",
    "nvml.slow-interval",
    "path.procfs",
    "collect.processes",
    "collect.mig",
    "metrics.max-label-value-length",
    "kube.node-name",
    "log.level",
    "log.format",
];

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
            assert!(!s.sample_interval.is_zero() && !s.nvml_slow_interval.is_zero());
            assert!((16..=65536).contains(&s.max_label_value_len));
            assert!(!s.node_name.is_empty());
            assert!(!s.demo, "demo comes from the flag only");
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
                        assert!(FLAGS.contains(flag), "unknown flag {flag:?} in {e}");
                    }
                }
                if let ConfigError::UnknownKey { key, .. } = e {
                    assert!(
                        !FLAGS.contains(&key.as_str()),
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

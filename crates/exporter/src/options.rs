//! What every component's options are made of: a value is taken as text from its flag, its
//! `TESSERA_*` environment mirror or the YAML file, and a [`Resolver`] turns it into the
//! component's type or records a [`ConfigError`] that names where it was written. Each
//! component declares its own flags (clap `Args`, flattened into `config::Cli`) and resolves
//! them beside the code that uses them; this file knows none of them.

use std::collections::BTreeMap;
use std::path::Path;
use std::time::Duration;

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

/// A duration that must not be zero (a cadence).
pub fn parse_positive_duration(s: &str) -> Result<Duration, String> {
    let d = parse_duration(s)?;
    if d.is_zero() {
        Err("must be greater than zero".into())
    } else {
        Ok(d)
    }
}

/// The spellings users write booleans in, in flags, environment variables and YAML alike.
pub fn parse_bool(s: &str) -> Result<bool, String> {
    match s.trim().to_ascii_lowercase().as_str() {
        "true" | "1" | "yes" | "on" => Ok(true),
        "false" | "0" | "no" | "off" => Ok(false),
        _ => Err("expected true or false (or 1/0, yes/no, on/off)".into()),
    }
}

/// A comma-separated list (a YAML sequence arrives joined with commas).
pub fn split_list(s: &str) -> Vec<String> {
    s.split(',')
        .map(str::trim)
        .filter(|x| !x.is_empty())
        .map(str::to_owned)
        .collect()
}

/// Settings from the YAML file, as text, keyed by flag name.
fn read_file(path: &Path, errors: &mut Vec<ConfigError>) -> BTreeMap<String, String> {
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

/// Resolves each component's settings in turn and collects every mistake, so one run
/// reports them all.
pub struct Resolver<'a> {
    file: BTreeMap<String, String>,
    file_path: String,
    from_env: &'a BTreeMap<String, String>,
    errors: Vec<ConfigError>,
}

impl<'a> Resolver<'a> {
    /// `from_env`: flags whose value came from their environment mirror, with the variable.
    pub fn new(config_file: Option<&Path>, from_env: &'a BTreeMap<String, String>) -> Self {
        let mut errors = Vec::new();
        let file = match config_file {
            Some(p) => read_file(p, &mut errors),
            None => BTreeMap::new(),
        };
        Resolver {
            file,
            file_path: config_file
                .map(|p| p.display().to_string())
                .unwrap_or_default(),
            from_env,
            errors,
        }
    }

    /// Flag (or env) first, then the file, then the default; invalid values are recorded and
    /// the default stands in so validation can go on.
    pub fn get<T>(
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
    pub fn get_bool(
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

    /// A setting taken from its flag or environment variable only, never from the file.
    pub fn get_unfiled<T>(
        &mut self,
        flag: &'static str,
        cli: &Option<String>,
        default: T,
        parse: impl Fn(&str) -> Result<T, String>,
    ) -> T {
        match cli {
            Some(v) => {
                let origin = self.cli_origin(flag);
                self.parse(flag, origin, v.clone(), default, parse)
            }
            None => default,
        }
    }

    /// Records settings that are valid alone but not together.
    pub fn conflict(&mut self, reason: String) {
        self.errors.push(ConfigError::Conflict { reason });
    }

    /// Every mistake found, the file's unknown keys last.
    pub fn finish(mut self) -> Vec<ConfigError> {
        for key in std::mem::take(&mut self.file).into_keys() {
            self.errors.push(ConfigError::UnknownKey {
                path: self.file_path.clone(),
                key,
            });
        }
        self.errors
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

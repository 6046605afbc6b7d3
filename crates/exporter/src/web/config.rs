//! The web config file, in the format of Prometheus's exporter-toolkit: parsed strictly (an
//! unknown key is an error, so a misspelt security setting can never be silently ignored),
//! validated, and turned into a ready rustls config and user table.
//!
//! Error messages name the file and the field, never a value: the file holds password hashes
//! and may hold an inline private key.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde::Deserialize;

use super::settings::{ClientAuth, TlsSettings, TlsVersion, User, WebConfig, WebConfigError};
use super::{auth, tls};

#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename = "web config")]
struct RawFile {
    tls_server_config: Option<RawTls>,
    http_server_config: Option<RawHttp>,
    // Values stay untyped until validated: a serde type error would quote the value, and a
    // mistakenly plain-text password must never reach a log line.
    basic_auth_users: Option<BTreeMap<String, serde_yaml::Value>>,
    rate_limit: Option<serde_yaml::Value>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename = "tls_server_config")]
struct RawTls {
    cert: Option<String>,
    key: Option<serde_yaml::Value>,
    client_ca: Option<String>,
    cert_file: Option<String>,
    key_file: Option<String>,
    client_auth_type: Option<String>,
    client_ca_file: Option<String>,
    client_allowed_sans: Option<Vec<String>>,
    min_version: Option<String>,
    max_version: Option<String>,
    cipher_suites: Option<Vec<String>>,
    prefer_server_cipher_suites: Option<bool>,
    curve_preferences: Option<Vec<String>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename = "http_server_config")]
struct RawHttp {
    http2: Option<bool>,
    headers: Option<BTreeMap<String, Option<String>>>,
}

/// Reads the config and the files it names, hashing everything it reads.
struct Reader<'a> {
    config: &'a Path,
    base: PathBuf,
    digest: ring::digest::Context,
    watched: Vec<PathBuf>,
}

impl Reader<'_> {
    fn invalid(&self, field: impl Into<String>, reason: impl Into<String>) -> WebConfigError {
        WebConfigError::new(self.config, Some(field.into()), reason.into())
    }

    fn absorb(&mut self, path: &Path, bytes: &[u8]) {
        let name = path.as_os_str().as_encoded_bytes();
        self.digest.update(&(name.len() as u64).to_le_bytes());
        self.digest.update(name);
        self.digest.update(&(bytes.len() as u64).to_le_bytes());
        self.digest.update(bytes);
        self.watched.push(path.to_path_buf());
    }

    fn read_config(&mut self) -> Result<Vec<u8>, WebConfigError> {
        let bytes = std::fs::read(self.config)
            .map_err(|e| WebConfigError::new(self.config, None, format!("cannot read: {e}")))?;
        let path = self.config.to_path_buf();
        self.absorb(&path, &bytes);
        Ok(bytes)
    }

    /// Relative paths are taken from the config file's directory, as exporter-toolkit does, so
    /// a config and its certificates can move together (e.g. one mounted Secret).
    fn read_named(&mut self, field: &'static str, name: &str) -> Result<Vec<u8>, WebConfigError> {
        let path = self.base.join(name);
        let bytes = std::fs::read(&path).map_err(|e| {
            self.invalid(
                format!("tls_server_config.{field}"),
                format!("cannot read {}: {e}", path.display()),
            )
        })?;
        self.absorb(&path, &bytes);
        Ok(bytes)
    }
}

/// Empty strings count as unset, as in exporter-toolkit (Go's zero value).
fn given(v: &Option<String>) -> Option<&str> {
    v.as_deref().filter(|s| !s.is_empty())
}

pub(crate) fn load(path: &Path) -> Result<WebConfig, WebConfigError> {
    let base = path.parent().map(Path::to_path_buf).unwrap_or_default();
    let mut r = Reader {
        config: path,
        base,
        digest: ring::digest::Context::new(&ring::digest::SHA256),
        watched: Vec::new(),
    };
    let bytes = r.read_config()?;
    // An empty file is valid and means "no TLS, no auth", as in exporter-toolkit.
    let raw: Option<RawFile> = serde_yaml::from_slice(&bytes)
        .map_err(|e| WebConfigError::new(path, None, format!("invalid YAML: {e}")))?;
    let raw = raw.unwrap_or(RawFile {
        tls_server_config: None,
        http_server_config: None,
        basic_auth_users: None,
        rate_limit: None,
    });
    if raw.rate_limit.is_some() {
        return Err(r.invalid("rate_limit", "not supported by tessera"));
    }
    let (http2, headers) = match raw.http_server_config {
        Some(h) => {
            let headers = auth::response_headers(h.headers.unwrap_or_default())
                .map_err(|(field, reason)| r.invalid(field, reason))?;
            (h.http2.unwrap_or(true), headers)
        }
        None => (true, Vec::new()),
    };
    let users = users(&r, raw.basic_auth_users.unwrap_or_default())?;
    let tls = match raw.tls_server_config {
        Some(t) => tls_settings(&mut r, t, http2)?,
        None => None,
    };
    let tls = match tls {
        Some(s) => Some(Arc::new(
            tls::server_config(&s).map_err(|(field, reason)| r.invalid(field, reason))?,
        )),
        None => None,
    };
    let digest = r.digest.finish();
    let mut fingerprint = [0u8; 32];
    fingerprint.copy_from_slice(digest.as_ref());
    Ok(WebConfig {
        tls,
        users: users.into(),
        headers: headers.into(),
        watched: r.watched,
        fingerprint,
    })
}

fn users(
    r: &Reader<'_>,
    raw: BTreeMap<String, serde_yaml::Value>,
) -> Result<Vec<User>, WebConfigError> {
    let mut out = Vec::with_capacity(raw.len());
    for (name, value) in raw {
        let field = format!("basic_auth_users.{name}");
        let serde_yaml::Value::String(hash) = value else {
            return Err(r.invalid(field, "must be a bcrypt hash (a string)"));
        };
        // Parse now so a plain-text password or a truncated hash fails at startup, not as a
        // mysterious 401 on every scrape.
        if hash.parse::<bcrypt::HashParts>().is_err() {
            return Err(r.invalid(
                field,
                "is not a bcrypt hash (expected $2y$/$2b$/$2a$, e.g. from htpasswd -nBC 10)",
            ));
        }
        out.push(User { name, hash });
    }
    Ok(out)
}

fn tls_settings(
    r: &mut Reader<'_>,
    t: RawTls,
    http2: bool,
) -> Result<Option<TlsSettings>, WebConfigError> {
    // Settings rustls cannot honour are refused rather than ignored: a config copied from
    // another exporter must not quietly lose a restriction it asked for.
    if t.client_allowed_sans
        .as_ref()
        .is_some_and(|v| !v.is_empty())
    {
        return Err(r.invalid(
            "tls_server_config.client_allowed_sans",
            "not supported by tessera",
        ));
    }
    if t.cipher_suites.as_ref().is_some_and(|v| !v.is_empty()) {
        return Err(r.invalid(
            "tls_server_config.cipher_suites",
            "not supported by tessera (rustls offers only modern AEAD suites)",
        ));
    }
    if t.curve_preferences.as_ref().is_some_and(|v| !v.is_empty()) {
        return Err(r.invalid(
            "tls_server_config.curve_preferences",
            "not supported by tessera",
        ));
    }
    let inline_key = match t.key {
        None | Some(serde_yaml::Value::Null) => None,
        Some(serde_yaml::Value::String(s)) if s.is_empty() => None,
        Some(serde_yaml::Value::String(s)) => Some(s),
        Some(_) => return Err(r.invalid("tls_server_config.key", "must be a PEM string")),
    };
    let anything = given(&t.cert).is_some()
        || inline_key.is_some()
        || given(&t.client_ca).is_some()
        || given(&t.cert_file).is_some()
        || given(&t.key_file).is_some()
        || given(&t.client_auth_type).is_some()
        || given(&t.client_ca_file).is_some();
    // exporter-toolkit serves plain HTTP when the section names no certificate, key or client
    // policy at all (a file holding only basic_auth_users).
    if !anything {
        return Ok(None);
    }
    let (cert_pem, cert_field) = match (given(&t.cert), given(&t.cert_file)) {
        (Some(_), Some(_)) => {
            return Err(r.invalid(
                "tls_server_config.cert",
                "set either cert or cert_file, not both",
            ))
        }
        (Some(pem), None) => (pem.as_bytes().to_vec(), "cert"),
        (None, Some(file)) => (r.read_named("cert_file", file)?, "cert_file"),
        (None, None) => return Err(r.invalid("tls_server_config.cert_file", "missing")),
    };
    let (key_pem, key_field) = match (inline_key, given(&t.key_file)) {
        (Some(_), Some(_)) => {
            return Err(r.invalid(
                "tls_server_config.key",
                "set either key or key_file, not both",
            ))
        }
        (Some(pem), None) => (pem.into_bytes(), "key"),
        (None, Some(file)) => (r.read_named("key_file", file)?, "key_file"),
        (None, None) => return Err(r.invalid("tls_server_config.key_file", "missing")),
    };
    let (client_ca_pem, client_ca_field) = match (given(&t.client_ca), given(&t.client_ca_file)) {
        (Some(_), Some(_)) => {
            return Err(r.invalid(
                "tls_server_config.client_ca",
                "set either client_ca or client_ca_file, not both",
            ))
        }
        (Some(pem), None) => (Some(pem.as_bytes().to_vec()), "client_ca"),
        (None, Some(file)) => (
            Some(r.read_named("client_ca_file", file)?),
            "client_ca_file",
        ),
        (None, None) => (None, "client_ca_file"),
    };
    let client_auth = match given(&t.client_auth_type).unwrap_or("NoClientCert") {
        "NoClientCert" => ClientAuth::NoClientCert,
        "RequestClientCert" => ClientAuth::RequestClientCert,
        "RequireAnyClientCert" => ClientAuth::RequireAnyClientCert,
        "VerifyClientCertIfGiven" => ClientAuth::VerifyClientCertIfGiven,
        "RequireAndVerifyClientCert" => ClientAuth::RequireAndVerifyClientCert,
        _ => {
            return Err(r.invalid(
                "tls_server_config.client_auth_type",
                "expected NoClientCert, RequestClientCert, RequireAnyClientCert, \
                 VerifyClientCertIfGiven or RequireAndVerifyClientCert",
            ))
        }
    };
    let verifies = matches!(
        client_auth,
        ClientAuth::VerifyClientCertIfGiven | ClientAuth::RequireAndVerifyClientCert
    );
    if client_ca_pem.is_some() && client_auth == ClientAuth::NoClientCert {
        return Err(r.invalid(
            format!("tls_server_config.{client_ca_field}"),
            "is set but client_auth_type is NoClientCert (use RequireAndVerifyClientCert)",
        ));
    }
    if client_ca_pem.is_none() && verifies {
        return Err(r.invalid(
            "tls_server_config.client_ca_file",
            "missing: client_auth_type verifies client certificates against it",
        ));
    }
    let min_version = version(r, "min_version", &t.min_version, TlsVersion::Tls12)?;
    let max_version = version(r, "max_version", &t.max_version, TlsVersion::Tls13)?;
    if min_version > max_version {
        return Err(r.invalid("tls_server_config.min_version", "is above max_version"));
    }
    Ok(Some(TlsSettings {
        cert_pem,
        cert_field,
        key_pem,
        key_field,
        client_ca_pem,
        client_ca_field,
        client_auth,
        min_version,
        max_version,
        prefer_server_cipher_suites: t.prefer_server_cipher_suites.unwrap_or(true),
        http2,
    }))
}

/// rustls speaks TLS 1.2 and 1.3 only: a minimum of TLS10/TLS11 is accepted and means 1.2 (it
/// only ever tightens), while a maximum below 1.2 could never be honoured and is an error.
fn version(
    r: &Reader<'_>,
    field: &'static str,
    raw: &Option<String>,
    default: TlsVersion,
) -> Result<TlsVersion, WebConfigError> {
    match given(raw) {
        None => Ok(default),
        Some("TLS10" | "TLS11") if field == "min_version" => Ok(TlsVersion::Tls12),
        Some("TLS12") => Ok(TlsVersion::Tls12),
        Some("TLS13") => Ok(TlsVersion::Tls13),
        Some("TLS10" | "TLS11") => Err(r.invalid(
            format!("tls_server_config.{field}"),
            "TLS 1.0 and 1.1 are not supported (use TLS12 or TLS13)",
        )),
        Some(_) => Err(r.invalid(
            format!("tls_server_config.{field}"),
            "expected TLS12 or TLS13",
        )),
    }
}

#[cfg(test)]
#[path = "config_tests.rs"]
mod tests;

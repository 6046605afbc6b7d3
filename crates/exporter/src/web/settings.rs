//! The plain types the web layer shares: a validated config, its users and TLS settings, and
//! the one error a config can fail with. They sit below the parser (`config`) and its users
//! (`auth`, `tls`), so each of those imports downward only.

use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use axum::http::{HeaderName, HeaderValue};
use tokio_rustls::rustls::ServerConfig;

/// A web config that cannot be used. The message is one line and names the file and the
/// field, never a value.
#[derive(Debug, thiserror::Error)]
#[error("{}", self.message())]
pub struct WebConfigError {
    path: PathBuf,
    field: Option<String>,
    reason: String,
}

impl WebConfigError {
    pub(crate) fn new(path: &Path, field: Option<String>, reason: String) -> Self {
        Self {
            path: path.to_path_buf(),
            field,
            // serde_yaml's messages can span lines; the contract is one line.
            reason: reason.replace('\n', " "),
        }
    }

    /// The web config file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The offending field, dotted (`tls_server_config.key_file`), when there is one.
    pub fn field(&self) -> Option<&str> {
        self.field.as_deref()
    }

    fn message(&self) -> String {
        match &self.field {
            Some(f) => format!("web config {}: {f}: {}", self.path.display(), self.reason),
            None => format!("web config {}: {}", self.path.display(), self.reason),
        }
    }
}

/// A validated web config, ready to serve with. Its `Debug` shows no hash and no key.
pub struct WebConfig {
    pub(crate) tls: Option<Arc<ServerConfig>>,
    pub(crate) users: Arc<[User]>,
    pub(crate) headers: Arc<[(HeaderName, HeaderValue)]>,
    /// The config file and every file it names, for the reload watcher.
    pub(crate) watched: Vec<PathBuf>,
    /// SHA-256 over the bytes of every file read, so a reload can tell "touched" from "changed".
    pub(crate) fingerprint: [u8; 32],
}

pub(crate) struct User {
    pub(crate) name: String,
    pub(crate) hash: String,
}

impl WebConfig {
    /// Whether connections are served over TLS.
    pub fn tls_enabled(&self) -> bool {
        self.tls.is_some()
    }

    /// How many basic-auth users are configured; 0 means basic auth is off.
    pub fn basic_auth_users(&self) -> usize {
        self.users.len()
    }
}

impl fmt::Debug for WebConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let names: Vec<&str> = self.users.iter().map(|u| u.name.as_str()).collect();
        f.debug_struct("WebConfig")
            .field("tls", &self.tls.is_some())
            .field("basic_auth_users", &names)
            .field("headers", &self.headers.len())
            .finish_non_exhaustive()
    }
}

/// exporter-toolkit's `client_auth_type` values, named after Go's `tls.ClientAuthType`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ClientAuth {
    NoClientCert,
    RequestClientCert,
    RequireAnyClientCert,
    VerifyClientCertIfGiven,
    RequireAndVerifyClientCert,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum TlsVersion {
    Tls12,
    Tls13,
}

/// PEM material (read from files or inline) and policy, before rustls has seen it.
pub(crate) struct TlsSettings {
    pub(crate) cert_pem: Vec<u8>,
    pub(crate) cert_field: &'static str,
    pub(crate) key_pem: Vec<u8>,
    pub(crate) key_field: &'static str,
    pub(crate) client_ca_pem: Option<Vec<u8>>,
    pub(crate) client_ca_field: &'static str,
    pub(crate) client_auth: ClientAuth,
    pub(crate) min_version: TlsVersion,
    pub(crate) max_version: TlsVersion,
    pub(crate) prefer_server_cipher_suites: bool,
    pub(crate) http2: bool,
}

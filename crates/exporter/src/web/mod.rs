//! TLS and basic auth for the HTTP endpoints, configured by a web config file in the format of
//! Prometheus's exporter-toolkit (`--web.config.file`), reloaded when it or a file it names
//! changes. See docs/security.md.
//!
//! Nothing here logs a password, a hash or key material: errors and log lines name the file
//! and the field only.

mod auth;
mod config;
mod options;
mod settings;
mod tls;

use std::fmt;
use std::future::Future;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use axum::Router;
use tokio::sync::watch;

pub use options::{WebArgs, WebOptions, DEFAULT_LISTEN};
pub use settings::{WebConfig, WebConfigError};

/// How often the web config and the files it names are checked for changes.
const RELOAD_INTERVAL: Duration = Duration::from_secs(2);
/// Every this many checks the files are re-read even if their mtime and size look unchanged,
/// for filesystems with coarse timestamps and same-size rewrites.
const FULL_CHECK_EVERY: u32 = 15;
/// A change is taken only once two reads this far apart agree.
const SETTLE: Duration = Duration::from_millis(250);

/// Reads and validates a web config file and every file it names (certificates, key, client
/// CA), so that a mistake is reported at startup. Blocking file I/O: call it before the server
/// starts, or from `spawn_blocking`.
pub fn load(path: &Path) -> Result<WebConfig, WebConfigError> {
    config::load(path)
}

/// Serves `app` on `listener` until `shutdown` completes.
///
/// - `None`: exactly `axum::serve(listener, app).with_graceful_shutdown(shutdown)`.
/// - `Some((path, config))`: basic auth (when users are configured) and the configured
///   response headers on every route; TLS when the config has `tls_server_config`. The file
///   at `path` and the files it names are watched; a valid change takes effect for new
///   connections and requests, an invalid one is logged once and the previous config is kept.
///   Turning TLS on or off needs a restart (the listener's protocol is fixed).
pub async fn serve(
    listener: tokio::net::TcpListener,
    app: Router,
    web: Option<(PathBuf, WebConfig)>,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    let Some((path, config)) = web else {
        return axum::serve(listener, app)
            .with_graceful_shutdown(shutdown)
            .await;
    };
    let tls = config.tls_enabled();
    tracing::info!(
        file = %path.display(),
        tls,
        basic_auth_users = config.basic_auth_users(),
        "web config loaded"
    );
    let (tx, rx) = watch::channel(Arc::new(config));
    let _watcher = AbortOnDrop(tokio::spawn(watch_config(path, tx, RELOAD_INTERVAL)));
    // The layer goes on even with no users: a reload may add some.
    let gate = Arc::new(auth::Auth::new(rx.clone()));
    let app = app.layer(axum::middleware::from_fn_with_state(gate, auth::layer));
    if tls {
        tls::serve(listener, app, rx, shutdown).await
    } else {
        axum::serve(listener, app)
            .with_graceful_shutdown(shutdown)
            .await
    }
}

struct AbortOnDrop(tokio::task::JoinHandle<()>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// What a file looked like at the last check: cheap to get, so most checks read nothing.
#[derive(PartialEq, Eq)]
struct Stamp(Vec<Option<(SystemTime, u64)>>);

impl fmt::Debug for Stamp {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Stamp({} files)", self.0.len())
    }
}

fn stamp(paths: &[PathBuf]) -> Stamp {
    Stamp(
        paths
            .iter()
            .map(|p| {
                let m = std::fs::metadata(p).ok()?;
                Some((m.modified().ok()?, m.len()))
            })
            .collect(),
    )
}

async fn stamp_of(config: &WebConfig) -> Option<Stamp> {
    let paths = config.watched.clone();
    tokio::task::spawn_blocking(move || stamp(&paths))
        .await
        .ok()
}

async fn load_blocking(path: &Path) -> Option<Result<WebConfig, WebConfigError>> {
    let path = path.to_path_buf();
    tokio::task::spawn_blocking(move || config::load(&path))
        .await
        .ok()
}

/// Loads twice, `SETTLE` apart, and answers only if both agree. A file rewritten in place is
/// briefly empty or half-written; an empty web config is valid and means "no auth", so taking
/// such a read could switch auth off until the next poll.
async fn load_settled(path: &Path) -> Option<Result<WebConfig, WebConfigError>> {
    let first = load_blocking(path).await?;
    tokio::time::sleep(SETTLE).await;
    let second = load_blocking(path).await?;
    let same = match (&first, &second) {
        (Ok(a), Ok(b)) => a.fingerprint == b.fingerprint,
        (Err(a), Err(b)) => a.to_string() == b.to_string(),
        _ => false,
    };
    same.then_some(second)
}

/// Polls the config and the files it names (mtime and size every tick, content hash when
/// those move or every `FULL_CHECK_EVERY` ticks) and swaps in a new config when the content
/// changed and is valid. A bad file is reported with one `warn!` per distinct problem; the
/// previous config stays in force.
async fn watch_config(path: PathBuf, tx: watch::Sender<Arc<WebConfig>>, every: Duration) {
    // None: the first tick reads the files, in case they changed between load() and serve().
    let mut stamps: Option<Stamp> = None;
    let mut problem: Option<String> = None;
    let mut ticks = 0u32;
    let mut interval = tokio::time::interval(every);
    interval.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    interval.tick().await;
    loop {
        interval.tick().await;
        ticks = ticks.wrapping_add(1);
        let current = tx.borrow().clone();
        let now = stamp_of(&current).await;
        // While the file is bad, re-read every tick: the fix may land in a file the current
        // config does not name (a new key_file), whose stamp is not tracked.
        if now.is_some() && now == stamps && problem.is_none() && ticks % FULL_CHECK_EVERY != 0 {
            continue;
        }
        stamps = now;
        let Some(loaded) = load_settled(&path).await else {
            // Still being written: look again next tick whatever the stamps say.
            stamps = None;
            continue;
        };
        let new = match loaded {
            Ok(new) => new,
            Err(e) => {
                let message = e.to_string();
                if problem.as_deref() != Some(message.as_str()) {
                    tracing::warn!("{message}; keeping the previous web config");
                }
                problem = Some(message);
                continue;
            }
        };
        if new.tls_enabled() != current.tls_enabled() {
            let message = format!(
                "web config {}: tls_server_config: turning TLS on or off needs a restart",
                path.display()
            );
            if problem.as_deref() != Some(message.as_str()) {
                tracing::warn!("{message}; keeping the previous web config");
            }
            problem = Some(message);
            continue;
        }
        problem = None;
        if new.fingerprint == current.fingerprint {
            continue;
        }
        stamps = stamp_of(&new).await;
        tracing::info!(
            file = %path.display(),
            tls = new.tls_enabled(),
            basic_auth_users = new.basic_auth_users(),
            "web config reloaded"
        );
        tx.send_replace(Arc::new(new));
    }
}

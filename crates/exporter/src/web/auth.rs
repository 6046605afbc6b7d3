//! Basic auth (bcrypt hashes, as in exporter-toolkit) and the configured response headers, as
//! one axum middleware over every route.
//!
//! Timing: an unknown user costs the same bcrypt verification as a known one (against a real
//! configured hash, whose result is then discarded), and user names are compared in constant
//! time, so response times do not tell which users exist.
//!
//! Cost: bcrypt at cost 10 takes ~50 ms of CPU. A successful check is remembered for
//! `CACHE_TTL`, keyed by user and SHA-256 of the password, in memory only, so many scrapers do
//! not each pay it on every scrape. Failures are never cached, and at most one verification
//! per core runs at a time, so a flood of bad passwords queues instead of starving the runtime.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use axum::extract::{Request, State};
use axum::http::{header, HeaderMap, HeaderName, HeaderValue, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use base64::Engine;
use subtle::{Choice, ConditionallySelectable, ConstantTimeEq};
use tokio::sync::{watch, Semaphore};

use super::settings::{User, WebConfig};

const CACHE_TTL: Duration = Duration::from_secs(60);
/// Bounds memory if many distinct valid credentials show up; full means pruned, then cleared.
const CACHE_MAX_ENTRIES: usize = 1024;

type Digest = [u8; 32];

struct CacheEntry {
    /// The hash the password was verified against: a reload that changes the user's hash
    /// invalidates the entry at once, with no need to flush anything.
    hash: Digest,
    expires: Instant,
}

pub(crate) struct Auth {
    config: watch::Receiver<Arc<WebConfig>>,
    cache: Mutex<HashMap<(String, Digest), CacheEntry>>,
    verifications: Semaphore,
}

impl Auth {
    pub(crate) fn new(config: watch::Receiver<Arc<WebConfig>>) -> Self {
        let cores = std::thread::available_parallelism().map_or(2, |n| n.get());
        Self {
            config,
            cache: Mutex::new(HashMap::new()),
            verifications: Semaphore::new(cores),
        }
    }

    fn cache(&self) -> MutexGuard<'_, HashMap<(String, Digest), CacheEntry>> {
        // A panic while holding this lock cannot leave the map half-updated in a way that
        // matters (entries are independent), so a poisoned lock is used as is.
        self.cache.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn cached(&self, user: &str, password: &Digest, hash: &Digest) -> bool {
        let key = (user.to_owned(), *password);
        self.cache()
            .get(&key)
            .is_some_and(|e| e.hash == *hash && e.expires > Instant::now())
    }

    fn remember(&self, user: String, password: Digest, hash: Digest) {
        let now = Instant::now();
        let mut cache = self.cache();
        if cache.len() >= CACHE_MAX_ENTRIES {
            cache.retain(|_, e| e.expires > now);
            if cache.len() >= CACHE_MAX_ENTRIES {
                cache.clear();
            }
        }
        cache.insert(
            (user, password),
            CacheEntry {
                hash,
                expires: now + CACHE_TTL,
            },
        );
    }

    async fn check(&self, users: &[User], headers: &HeaderMap) -> bool {
        let Some((name, password)) = credentials(headers) else {
            return false;
        };
        let Some((index, known)) = find_user(users, &name) else {
            return false;
        };
        let hash = users[index].hash.clone();
        let password_digest = sha256(password.as_bytes());
        let hash_digest = sha256(hash.as_bytes());
        // Both sides are evaluated whatever `known` is, to keep the paths alike.
        let hit = self.cached(&name, &password_digest, &hash_digest);
        if hit & bool::from(known) {
            return true;
        }
        let verified = {
            // The semaphore is never closed; should it be, verifying without a permit is safe.
            let _permit = self.verifications.acquire().await.ok();
            tokio::task::spawn_blocking(move || bcrypt::verify(password, &hash).unwrap_or(false))
                .await
                .unwrap_or(false)
        };
        let ok = verified & bool::from(known);
        if ok {
            self.remember(name, password_digest, hash_digest);
        }
        ok
    }
}

/// Index of the matching user, compared in constant time over the whole table; an unknown name
/// maps to user 0, whose hash is then verified and the result thrown away. `None` only when
/// there are no users at all.
fn find_user(users: &[User], name: &str) -> Option<(usize, Choice)> {
    if users.is_empty() {
        return None;
    }
    let mut index = 0u64;
    let mut found = Choice::from(0);
    for (i, user) in users.iter().enumerate() {
        let same = user.name.as_bytes().ct_eq(name.as_bytes());
        index = u64::conditional_select(&index, &(i as u64), same);
        found |= same;
    }
    Some((usize::try_from(index).unwrap_or(0), found))
}

fn sha256(bytes: &[u8]) -> Digest {
    let mut out = [0u8; 32];
    out.copy_from_slice(ring::digest::digest(&ring::digest::SHA256, bytes).as_ref());
    out
}

/// `Authorization: Basic base64(user:password)`; anything else is no credentials.
fn credentials(headers: &HeaderMap) -> Option<(String, String)> {
    let value = headers.get(header::AUTHORIZATION)?.to_str().ok()?;
    let (scheme, encoded) = value.trim().split_once(' ')?;
    if !scheme.eq_ignore_ascii_case("basic") {
        return None;
    }
    let decoded = base64::engine::general_purpose::STANDARD
        .decode(encoded.trim())
        .ok()?;
    let text = String::from_utf8(decoded).ok()?;
    let (user, password) = text.split_once(':')?;
    Some((user.to_owned(), password.to_owned()))
}

fn unauthorized() -> Response {
    (
        StatusCode::UNAUTHORIZED,
        [(header::WWW_AUTHENTICATE, r#"Basic realm="tessera""#)],
        "Unauthorized\n",
    )
        .into_response()
}

/// Applied to every route, `/healthz` and `/readyz` included, as exporter-toolkit does.
pub(crate) async fn layer(State(auth): State<Arc<Auth>>, req: Request, next: Next) -> Response {
    // One config for the whole request, even if a reload lands halfway through.
    let config = auth.config.borrow().clone();
    let allowed = config.users.is_empty() || auth.check(&config.users, req.headers()).await;
    let mut response = if allowed {
        next.run(req).await
    } else {
        tracing::debug!("basic auth failed");
        unauthorized()
    };
    for (name, value) in config.headers.iter() {
        response.headers_mut().insert(name.clone(), value.clone());
    }
    response
}

/// The response headers exporter-toolkit allows, and the values it allows where it limits them.
const HEADERS: [(&str, &[&str]); 5] = [
    ("Content-Security-Policy", &[]),
    ("X-Frame-Options", &["deny", "sameorigin"]),
    ("X-Content-Type-Options", &["nosniff"]),
    ("X-XSS-Protection", &[]),
    ("Strict-Transport-Security", &[]),
];

/// Validates `http_server_config.headers`; errors are (field, reason).
pub(crate) fn response_headers(
    raw: BTreeMap<String, Option<String>>,
) -> Result<Vec<(HeaderName, HeaderValue)>, (String, String)> {
    let mut out = Vec::new();
    for (name, value) in raw {
        let field = format!("http_server_config.headers.{name}");
        let Some((_, allowed)) = HEADERS.iter().find(|(n, _)| *n == name) else {
            let names: Vec<&str> = HEADERS.iter().map(|(n, _)| *n).collect();
            let reason = format!("unknown header (expected one of {})", names.join(", "));
            return Err((field, reason));
        };
        let Some(value) = value.as_deref().filter(|v| !v.is_empty()) else {
            continue;
        };
        if !allowed.is_empty() && !allowed.iter().any(|a| a.eq_ignore_ascii_case(value)) {
            return Err((field, format!("must be one of {}", allowed.join(", "))));
        }
        let invalid = || (field.clone(), "not a valid header value".to_string());
        let value = HeaderValue::from_str(value).map_err(|_| invalid())?;
        // from_bytes lower-cases the name, as HTTP/2 requires.
        let name = HeaderName::from_bytes(name.as_bytes()).map_err(|_| invalid())?;
        out.push((name, value));
    }
    Ok(out)
}

#[cfg(test)]
#[path = "auth_tests.rs"]
mod tests;

//! HTTP: /metrics serves the bytes the sampler published; nothing here touches NVML, the kubelet
//! or the API server.

use std::io::Write;
use std::sync::Arc;

use axum::body::Bytes;
use axum::extract::State;
use axum::http::{header, HeaderMap, StatusCode};
use axum::response::{Html, IntoResponse, Response};
use axum::routing::get;
use axum::Router;

use crate::metrics::CONTENT_TYPE;
use crate::sampler::{Published, PublishedRx};

#[derive(Clone)]
pub struct AppState {
    pub published: PublishedRx,
    pub enable_debug: bool,
}

pub fn router(state: AppState) -> Router {
    let mut r = Router::new()
        .route("/", get(index))
        .route("/metrics", get(metrics))
        .route("/healthz", get(|| async { "ok\n" }))
        .route("/readyz", get(readyz));
    if state.enable_debug {
        r = r.route("/debug/attribution", get(attribution));
    } else {
        // A bare 404 reads as a wrong URL; the page exists, it is off by choice.
        r = r.route(
            "/debug/attribution",
            get(|| async { (StatusCode::NOT_FOUND, DEBUG_OFF) }),
        );
    }
    r.with_state(Arc::new(state))
}

/// The second listener (`--web.dcgm-listen-address`): only the dcgm-exporter-compatible
/// families, for tools that find dcgm-exporter by its port.
pub fn dcgm_router(published: PublishedRx) -> Router {
    Router::new()
        .route("/metrics", get(dcgm_metrics))
        .route("/healthz", get(|| async { "ok\n" }))
        .route("/readyz", get(readyz))
        .with_state(Arc::new(AppState {
            published,
            enable_debug: false,
        }))
}

const NOT_READY: &str = "no sample yet\n";
const DEBUG_OFF: &str =
    "/debug/attribution is off: start tessera with --web.enable-debug to serve it\n";

/// Which bytes of a sample a listener serves.
#[derive(Clone, Copy)]
enum Body {
    All,
    Dcgm,
}

async fn metrics(State(s): State<Arc<AppState>>, headers: HeaderMap) -> Response {
    serve_metrics(&s, &headers, Body::All).await
}

async fn dcgm_metrics(State(s): State<Arc<AppState>>, headers: HeaderMap) -> Response {
    serve_metrics(&s, &headers, Body::Dcgm).await
}

async fn serve_metrics(s: &AppState, headers: &HeaderMap, which: Body) -> Response {
    let published = s.published.borrow().clone();
    let Some(p) = published else {
        return (StatusCode::SERVICE_UNAVAILABLE, NOT_READY).into_response();
    };
    let raw = match which {
        Body::All => p.exposition.clone(),
        Body::Dcgm => match &p.dcgm {
            Some(d) => d.clone(),
            None => {
                return (StatusCode::NOT_FOUND, "--metrics.dcgm-compat is off\n").into_response()
            }
        },
    };
    let vary = (header::VARY, "Accept-Encoding");
    if accepts_gzip(headers) {
        if let Some(body) = gzipped(&p, which).await {
            return (
                [
                    (header::CONTENT_TYPE, CONTENT_TYPE),
                    (header::CONTENT_ENCODING, "gzip"),
                    vary,
                ],
                body,
            )
                .into_response();
        }
    }
    ([(header::CONTENT_TYPE, CONTENT_TYPE), vary], raw).into_response()
}

/// The sample's gzipped exposition, compressed off the async workers by the first scrape that
/// wants it while the others await the same result. `None` (serve it plain) if that fails.
async fn gzipped(p: &Arc<Published>, which: Body) -> Option<Bytes> {
    let (raw, cell) = match which {
        Body::All => (p.exposition.clone(), &p.gzipped),
        Body::Dcgm => (p.dcgm.clone()?, &p.dcgm_gzipped),
    };
    let made = cell
        .get_or_try_init(|| async move {
            tokio::task::spawn_blocking(move || gzip(&raw))
                .await
                .map_err(|e| e.to_string())?
                .map_err(|e| e.to_string())
        })
        .await;
    match made {
        Ok(body) => Some(body.clone()),
        Err(e) => {
            tracing::warn!(error = %e, "cannot gzip the exposition; serving it uncompressed");
            None
        }
    }
}

/// The fastest level: Prometheus text shrinks ~10x at it, and a scrape waits for it.
fn gzip(raw: &[u8]) -> std::io::Result<Bytes> {
    let mut enc = flate2::write::GzEncoder::new(
        Vec::with_capacity(raw.len() / 8),
        flate2::Compression::fast(),
    );
    enc.write_all(raw)?;
    Ok(Bytes::from(enc.finish()?))
}

/// Whether `Accept-Encoding` allows gzip (RFC 9110 §12.5.3): listed, or covered by `*`, with a
/// non-zero weight.
fn accepts_gzip(headers: &HeaderMap) -> bool {
    let mut gzip = None;
    let mut star = None;
    for value in headers.get_all(header::ACCEPT_ENCODING) {
        let Ok(value) = value.to_str() else { continue };
        for item in value.split(',') {
            let mut parts = item.split(';');
            let coding = parts.next().unwrap_or("").trim();
            let weight = parts
                .find_map(|p| {
                    let (k, v) = p.split_once('=')?;
                    k.trim().eq_ignore_ascii_case("q").then(|| v.trim())
                })
                .map_or(1.0, |q| q.parse::<f32>().unwrap_or(0.0));
            if coding.eq_ignore_ascii_case("gzip") || coding.eq_ignore_ascii_case("x-gzip") {
                gzip = Some(weight > 0.0);
            } else if coding == "*" {
                star = Some(weight > 0.0);
            }
        }
    }
    gzip.or(star).unwrap_or(false)
}

async fn readyz(State(s): State<Arc<AppState>>) -> Response {
    if s.published.borrow().is_some() {
        "ready\n".into_response()
    } else {
        (StatusCode::SERVICE_UNAVAILABLE, NOT_READY).into_response()
    }
}

async fn attribution(State(s): State<Arc<AppState>>) -> Response {
    let published = s.published.borrow().clone();
    match published {
        Some(p) => axum::Json(p.snapshot.clone()).into_response(),
        None => (StatusCode::SERVICE_UNAVAILABLE, NOT_READY).into_response(),
    }
}

async fn index(State(s): State<Arc<AppState>>) -> Html<String> {
    let debug = if s.enable_debug {
        r#"<li><a href="/debug/attribution">/debug/attribution</a> — who holds and uses each GPU, and why its sharing mode</li>"#
    } else {
        ""
    };
    Html(format!(
        "<!doctype html><title>tessera</title><h1>tessera</h1><p>GPU node exporter for shared GPUs.</p><ul>\
         <li><a href=\"/metrics\">/metrics</a></li><li><a href=\"/healthz\">/healthz</a></li>\
         <li><a href=\"/readyz\">/readyz</a></li>{debug}</ul>"
    ))
}

#[cfg(test)]
#[path = "server_tests.rs"]
mod tests;

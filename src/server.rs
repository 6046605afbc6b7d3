//! HTTP: /metrics serves the bytes the sampler published; nothing here touches NVML, the kubelet
//! or the API server.

use std::sync::Arc;

use axum::extract::State;
use axum::http::{header, StatusCode};
use axum::response::{Html, IntoResponse, Response};
use axum::routing::get;
use axum::Router;

use crate::metrics::CONTENT_TYPE;
use crate::sampler::PublishedRx;

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
    }
    r.with_state(Arc::new(state))
}

const NOT_READY: &str = "no sample yet\n";

async fn metrics(State(s): State<Arc<AppState>>) -> Response {
    let published = s.published.borrow().clone();
    match published {
        Some(p) => ([(header::CONTENT_TYPE, CONTENT_TYPE)], p.exposition.clone()).into_response(),
        None => (StatusCode::SERVICE_UNAVAILABLE, NOT_READY).into_response(),
    }
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

//! A small fake Kubernetes API server for tests and the demo.
//!
//! It speaks just enough of the real wire protocol for kube-rs's typed `Api` list, watch and
//! get: pods (list with `fieldSelector`, pagination, newline-delimited watch streams with
//! resource versions and bookmarks), single nodes, and `resource.k8s.io` ResourceSlices (list)
//! and ResourceClaims (get) in `v1` and `v1beta1`. Objects are real k8s-openapi types serialized with serde_json, so the
//! client decodes the same JSON a real API server sends. Faults (500s, latency, expired
//! watches, a stopped server) are injected through [`FakeApiServer`]'s methods.

use std::collections::{BTreeMap, HashMap};
use std::io;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use axum::body::Body;
use axum::extract::{Path, Query, State as AxState};
use axum::http::{header, StatusCode, Uri};
use axum::response::Response;
use axum::routing::get;
use axum::Router;
use futures::StreamExt;
use k8s_openapi::api::core::v1::{Node, Pod};
use k8s_openapi::api::resource::v1::ResourceSlice;
use serde_json::{json, Value};
use tokio::sync::{mpsc, oneshot};

use wire::{event_for, json_response, line, name_of, status, status_json, to_value, Selector};

mod dra;
mod wire;

#[cfg(test)]
mod tests;

/// What the fake serves at start.
#[derive(Debug, Clone)]
pub struct FakeCluster {
    pub pods: Vec<Pod>,
    pub nodes: Vec<Node>,
    pub slices: Vec<ResourceSlice>,
    /// ResourceClaims as `resource.k8s.io/v1` JSON; raw, so tests can serve any parameters.
    pub claims: Vec<Value>,
    pub serve_v1: bool,
    pub serve_v1beta1: bool,
    /// How often open watches that asked for bookmarks get one; keeps clients that use a read
    /// timeout from declaring a quiet watch dead, as a real API server's bookmarks do.
    pub bookmark_every: Duration,
}

impl Default for FakeCluster {
    fn default() -> Self {
        Self {
            pods: Vec::new(),
            nodes: Vec::new(),
            slices: Vec::new(),
            claims: Vec::new(),
            serve_v1: true,
            serve_v1beta1: true,
            bookmark_every: Duration::from_millis(500),
        }
    }
}

/// How [`FakeApiServer::expire_watches_with`] tells clients their resource version is gone.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Expiry {
    /// An `ERROR` watch event with a 410 Status on each open watch (what real servers send).
    ErrorEvent,
    /// Open watches end quietly; the client's re-watch from its old version gets HTTP 410.
    HttpGone,
}

type Key = (String, String);

/// Watch history kept for resuming watches.
const MAX_HISTORY: usize = 10_000;

/// Field selectors the real API server accepts for these resources (a subset).
const POD_FIELDS: &[&str] = &[
    "metadata.name",
    "metadata.namespace",
    "spec.nodeName",
    "status.phase",
];
struct Change {
    rv: u64,
    old: Option<Pod>,
    new: Option<Pod>,
}

struct Watcher {
    selector: Selector,
    bookmarks: bool,
    tx: mpsc::UnboundedSender<String>,
}

struct Inner {
    rv: u64,
    /// Watches that start below this version are expired (history before it was compacted).
    min_rv: u64,
    pods: BTreeMap<Key, Pod>,
    history: Vec<Change>,
    watchers: Vec<Watcher>,
    nodes: BTreeMap<String, Node>,
    slices: Vec<ResourceSlice>,
    claims: Vec<Value>,
    serve_v1: bool,
    serve_v1beta1: bool,
    fail: Option<(u32, u16)>,
    delay: Duration,
    stopped: bool,
}

struct Shared {
    inner: Mutex<Inner>,
    requests: AtomicU64,
    log: Mutex<Vec<String>>,
}

impl Shared {
    // A panic while holding the lock only happens in a failing test; keep serving regardless.
    fn lock(&self) -> MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// A running fake API server; dropping it stops it.
pub struct FakeApiServer {
    addr: SocketAddr,
    shared: Arc<Shared>,
    shutdown: Mutex<Option<oneshot::Sender<()>>>,
}

impl FakeApiServer {
    /// Binds 127.0.0.1 on an ephemeral port and serves `initial`.
    pub async fn start(initial: FakeCluster) -> io::Result<Self> {
        let listener = tokio::net::TcpListener::bind(("127.0.0.1", 0)).await?;
        let addr = listener.local_addr()?;
        let mut inner = Inner {
            rv: 1,
            min_rv: 1,
            pods: BTreeMap::new(),
            history: Vec::new(),
            watchers: Vec::new(),
            nodes: initial
                .nodes
                .into_iter()
                .map(|n| (name_of(&n.metadata), n))
                .collect(),
            slices: initial.slices,
            claims: initial.claims,
            serve_v1: initial.serve_v1,
            serve_v1beta1: initial.serve_v1beta1,
            fail: None,
            delay: Duration::ZERO,
            stopped: false,
        };
        inner.apply_pods(initial.pods);
        let shared = Arc::new(Shared {
            inner: Mutex::new(inner),
            requests: AtomicU64::new(0),
            log: Mutex::new(Vec::new()),
        });
        let app = Router::new()
            .route("/api/v1/pods", get(pods_handler))
            .route("/api/v1/nodes/{name}", get(node_handler))
            .route(
                "/apis/resource.k8s.io/{version}/resourceslices",
                get(dra::slices_handler),
            )
            .route(
                "/apis/resource.k8s.io/{version}/namespaces/{namespace}/resourceclaims/{name}",
                get(dra::claim_handler),
            )
            .fallback(|| async {
                status(
                    404,
                    "NotFound",
                    "the server could not find the requested resource",
                )
            })
            .with_state(shared.clone());
        let (tx, rx) = oneshot::channel::<()>();
        tokio::spawn(async move {
            let serve = axum::serve(listener, app).with_graceful_shutdown(async {
                let _ = rx.await;
            });
            if let Err(e) = serve.await {
                tracing::warn!(error = %e, "fake API server stopped with an error");
            }
        });
        tokio::spawn(bookmarks(Arc::downgrade(&shared), initial.bookmark_every));
        Ok(Self {
            addr,
            shared,
            shutdown: Mutex::new(Some(tx)),
        })
    }

    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// Replaces the pod set; open watches see ADDED / MODIFIED / DELETED, keyed by namespace/name.
    pub fn set_pods(&self, pods: Vec<Pod>) {
        self.shared.lock().apply_pods(pods);
    }

    /// Adds or replaces a node by name.
    pub fn set_node(&self, node: Node) {
        self.shared
            .lock()
            .nodes
            .insert(name_of(&node.metadata), node);
    }

    pub fn set_slices(&self, slices: Vec<ResourceSlice>) {
        self.shared.lock().slices = slices;
    }

    /// Replaces the claims (v1 JSON, keyed by `metadata.namespace` and `metadata.name`).
    pub fn set_claims(&self, claims: Vec<Value>) {
        self.shared.lock().claims = claims;
    }

    /// Switches the `resource.k8s.io` versions on or off (off answers 404, like an old cluster).
    pub fn serve_resource_versions(&self, v1: bool, v1beta1: bool) {
        let mut st = self.shared.lock();
        st.serve_v1 = v1;
        st.serve_v1beta1 = v1beta1;
    }

    /// The next `n` requests of any kind fail with HTTP `status`; `n = 0` clears.
    pub fn fail_next(&self, n: u32, status: u16) {
        self.shared.lock().fail = (n > 0).then_some((n, status));
    }

    /// Every new request waits this long before it is answered.
    pub fn delay(&self, d: Duration) {
        self.shared.lock().delay = d;
    }

    /// Expires every open watch with an in-stream 410 ERROR event.
    pub fn expire_watches(&self) {
        self.expire_watches_with(Expiry::ErrorEvent);
    }

    /// Compacts history so that no watch can resume from a version handed out so far.
    pub fn expire_watches_with(&self, how: Expiry) {
        let mut st = self.shared.lock();
        st.rv += 1;
        st.min_rv = st.rv;
        st.history.clear();
        let watchers = std::mem::take(&mut st.watchers);
        if how == Expiry::ErrorEvent {
            let line = line(
                &json!({"type": "ERROR", "object": status_json(410, "Expired", "too old resource version")}),
            );
            for w in watchers {
                let _ = w.tx.send(line.clone());
            }
        }
    }

    /// Requests received so far, of any kind.
    pub fn requests(&self) -> u64 {
        self.shared.requests.load(Ordering::Relaxed)
    }

    /// Path and query of every request so far (the first 10,000), oldest first.
    pub fn request_log(&self) -> Vec<String> {
        self.shared
            .log
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// Stops listening and ends every open watch; idempotent.
    pub fn stop(&self) {
        let mut st = self.shared.lock();
        st.stopped = true;
        st.watchers.clear();
        drop(st);
        let tx = self
            .shutdown
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .take();
        if let Some(tx) = tx {
            let _ = tx.send(());
        }
    }
}

impl Drop for FakeApiServer {
    fn drop(&mut self) {
        self.stop();
    }
}

impl Inner {
    fn apply_pods(&mut self, pods: Vec<Pod>) {
        let mut next: BTreeMap<Key, Pod> = BTreeMap::new();
        for p in pods {
            let key = (
                p.metadata.namespace.clone().unwrap_or_default(),
                name_of(&p.metadata),
            );
            next.insert(key, p);
        }
        let gone: Vec<Key> = self
            .pods
            .keys()
            .filter(|k| !next.contains_key(*k))
            .cloned()
            .collect();
        for key in gone {
            if let Some(old) = self.pods.remove(&key) {
                self.rv += 1;
                // A DELETED event carries the last state at the deletion's version.
                let mut shown = old;
                shown.metadata.resource_version = Some(self.rv.to_string());
                self.record(Change {
                    rv: self.rv,
                    old: Some(shown),
                    new: None,
                });
            }
        }
        for (key, mut pod) in next {
            let old = self.pods.get(&key).cloned();
            if let Some(o) = &old {
                pod.metadata.resource_version = o.metadata.resource_version.clone();
                if *o == pod {
                    continue;
                }
            }
            self.rv += 1;
            pod.metadata.resource_version = Some(self.rv.to_string());
            self.pods.insert(key, pod.clone());
            self.record(Change {
                rv: self.rv,
                old,
                new: Some(pod),
            });
        }
    }

    fn record(&mut self, change: Change) {
        self.watchers
            .retain(|w| match event_for(&w.selector, &change) {
                Some(ev) => w.tx.send(ev).is_ok(),
                None => !w.tx.is_closed(),
            });
        self.history.push(change);
        // Compact like etcd does, so a long demo stays bounded; watches from before the
        // oldest kept change then expire, as they would on a real server.
        if self.history.len() > MAX_HISTORY {
            self.history.drain(..MAX_HISTORY / 2);
            self.min_rv = self.history.first().map_or(self.rv, |c| c.rv - 1);
        }
    }
}

async fn bookmarks(shared: std::sync::Weak<Shared>, every: Duration) {
    let mut tick = tokio::time::interval(every.max(Duration::from_millis(10)));
    loop {
        tick.tick().await;
        let Some(shared) = shared.upgrade() else {
            return;
        };
        let mut st = shared.lock();
        let ev = line(
            &json!({"type": "BOOKMARK", "object": {"kind": "Pod", "apiVersion": "v1",
            "metadata": {"resourceVersion": st.rv.to_string()}}}),
        );
        st.watchers
            .retain(|w| !w.bookmarks || w.tx.send(ev.clone()).is_ok());
    }
}

/// Counts the request and applies injected delay and failures; `Some` answers it.
async fn preamble(shared: &Shared, uri: &Uri) -> Option<Response> {
    shared.requests.fetch_add(1, Ordering::Relaxed);
    {
        let mut log = shared.log.lock().unwrap_or_else(|e| e.into_inner());
        if log.len() < 10_000 {
            log.push(uri.to_string());
        }
    }
    let delay = shared.lock().delay;
    if !delay.is_zero() {
        tokio::time::sleep(delay).await;
    }
    let mut st = shared.lock();
    if st.stopped {
        return Some(status(503, "ServiceUnavailable", "stopping"));
    }
    let (n, code) = st.fail?;
    st.fail = (n > 1).then_some((n - 1, code));
    Some(status(code, "InternalError", "injected failure"))
}

async fn pods_handler(
    AxState(shared): AxState<Arc<Shared>>,
    uri: Uri,
    Query(q): Query<HashMap<String, String>>,
) -> Response {
    if let Some(r) = preamble(&shared, &uri).await {
        return r;
    }
    let selector = match Selector::parse(q.get("fieldSelector"), POD_FIELDS) {
        Ok(s) => s,
        Err(msg) => return status(400, "BadRequest", &msg),
    };
    if q.get("watch").is_some_and(|w| w == "true" || w == "1") {
        return watch_pods(&shared, &q, selector);
    }
    let st = shared.lock();
    let (list_rv, offset) = match q.get("continue").filter(|c| !c.is_empty()) {
        None => (st.rv, 0),
        Some(c) => match c
            .split_once(':')
            .and_then(|(a, b)| Some((a.parse().ok()?, b.parse().ok()?)))
        {
            Some((rv, _)) if rv < st.min_rv => {
                return status(410, "Expired", "the continue token has expired")
            }
            Some(t) => t,
            None => return status(400, "BadRequest", "malformed continue token"),
        },
    };
    let matching: Vec<&Pod> = st
        .pods
        .values()
        .filter(|p| selector.matches(&to_value(p)))
        .collect();
    let limit = q
        .get("limit")
        .and_then(|l| l.parse::<usize>().ok())
        .filter(|l| *l > 0)
        .unwrap_or(usize::MAX);
    let page: Vec<&Pod> = matching.iter().skip(offset).take(limit).copied().collect();
    let more = offset.saturating_add(limit) < matching.len();
    let mut meta = json!({"resourceVersion": list_rv.to_string()});
    if more {
        meta["continue"] = json!(format!("{list_rv}:{}", offset + limit));
    }
    json_response(
        200,
        &json!({"apiVersion": "v1", "kind": "PodList", "metadata": meta, "items": page}),
    )
}

fn watch_pods(shared: &Shared, q: &HashMap<String, String>, selector: Selector) -> Response {
    let mut st = shared.lock();
    let (tx, rx) = mpsc::unbounded_channel::<String>();
    match q
        .get("resourceVersion")
        .map(String::as_str)
        .filter(|v| !v.is_empty() && *v != "0")
    {
        // No version: a real server starts with the current state as synthetic ADDED events.
        None => {
            for p in st.pods.values().filter(|p| selector.matches(&to_value(p))) {
                let _ = tx.send(line(&json!({"type": "ADDED", "object": p})));
            }
        }
        Some(v) => {
            let Ok(from) = v.parse::<u64>() else {
                return status(400, "BadRequest", "invalid resourceVersion");
            };
            if from < st.min_rv {
                return status(410, "Expired", "too old resource version");
            }
            for ev in st
                .history
                .iter()
                .filter(|c| c.rv > from)
                .filter_map(|c| event_for(&selector, c))
            {
                let _ = tx.send(ev);
            }
        }
    }
    let bookmarks = q.get("allowWatchBookmarks").is_some_and(|b| b == "true");
    st.watchers.push(Watcher {
        selector,
        bookmarks,
        tx,
    });
    drop(st);
    let timeout = q
        .get("timeoutSeconds")
        .and_then(|t| t.parse::<u64>().ok())
        .map(Duration::from_secs);
    let events = futures::stream::unfold(rx, |mut rx| async move {
        rx.recv()
            .await
            .map(|l| (Ok::<_, std::convert::Infallible>(l), rx))
    });
    let events = match timeout {
        Some(t) => events.take_until(tokio::time::sleep(t)).boxed(),
        None => events.boxed(),
    };
    Response::builder()
        .status(StatusCode::OK)
        .header(header::CONTENT_TYPE, "application/json")
        .body(Body::from_stream(events))
        .unwrap_or_else(|_| status(500, "InternalError", "response build failed"))
}

async fn node_handler(
    AxState(shared): AxState<Arc<Shared>>,
    uri: Uri,
    Path(name): Path<String>,
) -> Response {
    if let Some(r) = preamble(&shared, &uri).await {
        return r;
    }
    match shared.lock().nodes.get(&name) {
        Some(n) => json_response(200, &to_value(n)),
        None => status(404, "NotFound", &format!("nodes \"{name}\" not found")),
    }
}

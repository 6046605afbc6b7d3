//! The Kubernetes API source: this node's pods (a node-scoped reflector), its labels and,
//! with DRA, its ResourceSlices and the pods' ResourceClaims, published as one immutable
//! [`ClusterView`].
//!
//! Each part fails alone: a failing part marks the source unhealthy and keeps the last good
//! data, and every part retries with backoff. Nothing here runs on the scrape path.

mod claims;
mod node;
mod options;
mod pods;
mod slices;

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use ::kube::api::Api;
use ::kube::runtime::watcher;
use ::kube::Client;
use futures::StreamExt;
use k8s_openapi::api::core::v1::{Node, Pod};
use tokio::sync::{mpsc, watch};
use tokio::task::JoinHandle;

use crate::model::dra_claim::{DraClaim, DraDevice};
use crate::source::SourceState;

pub use options::{KubeArgs, KubeOptions};

pub use crate::model::cluster::{
    ClusterView, ContainerMeta, NodeSharing, PodMeta, SharingStrategy,
};

/// Bounds every response so a hung API server surfaces as an error; above the watch timeout,
/// because a quiet watch legitimately sends nothing until the server closes it.
const READ_TIMEOUT: Duration = Duration::from_secs(pods::WATCH_TIMEOUT_SECS as u64 + 30);
/// First retry after a failed node or slice read; doubles up to `resync_every`.
const RETRY_MIN: Duration = Duration::from_secs(1);
/// Longest `last_error` kept: it ends up in logs and debug pages.
const MAX_ERROR_LEN: usize = 300;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KubeConfig {
    /// This node's name (the downward API's `spec.nodeName`).
    pub node_name: String,
    /// Pod label keys copied onto series; every other label is dropped.
    pub pod_labels: Vec<String>,
    /// Read `resource.k8s.io` ResourceSlices of this node.
    pub dra: bool,
    /// A changed view is published at most this often.
    pub publish_every: Duration,
    /// Node labels and ResourceSlices are re-read this often (they change rarely).
    pub resync_every: Duration,
    /// Limit for one node GET or slice LIST.
    pub request_timeout: Duration,
}

impl KubeConfig {
    pub fn new(node_name: impl Into<String>) -> Self {
        Self {
            node_name: node_name.into(),
            pod_labels: Vec::new(),
            dra: false,
            publish_every: Duration::from_secs(1),
            resync_every: Duration::from_secs(60),
            request_timeout: Duration::from_secs(10),
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum KubeSourceError {
    #[error("invalid kubernetes source config: {0}")]
    InvalidConfig(String),
    #[error("no usable kubeconfig or in-cluster config: {0}")]
    Infer(#[from] ::kube::config::InferConfigError),
    #[error("invalid API server URL {url:?}: {reason}")]
    Url { url: String, reason: String },
    #[error("building the kubernetes client: {0}")]
    Client(#[source] ::kube::Error),
    #[error("{what}: {source}")]
    Api {
        what: &'static str,
        #[source]
        source: ::kube::Error,
    },
    #[error("{what}: no answer within {after:?}")]
    Timeout { what: &'static str, after: Duration },
    #[error("resource.k8s.io ResourceSlices are served neither as v1 nor as v1beta1")]
    DraNotServed,
    #[error("{0} resourceclaims on this node; only the first {max} are read", max = claims::MAX_CLAIMS)]
    TooManyClaims(usize),
}

/// A client from the in-cluster service account, or else the local kubeconfig.
pub async fn client_from_env() -> Result<Client, KubeSourceError> {
    let config = ::kube::Config::infer().await?;
    Client::try_from(bounded(config)).map_err(KubeSourceError::Client)
}

/// A client for a plain URL (`http://127.0.0.1:8001` behind `kubectl proxy`, or a fake).
/// Async only because building a client spawns its request buffer on the runtime.
pub async fn client_for_url(url: &str) -> Result<Client, KubeSourceError> {
    let config = match url.parse() {
        Ok(uri) => ::kube::Config::new(uri),
        Err(e) => {
            return Err(KubeSourceError::Url {
                url: url.to_string(),
                reason: e.to_string(),
            })
        }
    };
    Client::try_from(bounded(config)).map_err(KubeSourceError::Client)
}

// kube-rs sets no read timeout by default, so a list against a server that accepted the
// connection and went silent would hang the reflector forever.
fn bounded(mut config: ::kube::Config) -> ::kube::Config {
    config.read_timeout = Some(READ_TIMEOUT);
    // Otherwise time a pooled connection sat idle counts against the next response.
    config.reset_reader_on_write = true;
    config
}

/// Starts the source. It never waits for the API server: until the first pod list succeeds
/// `tx` holds no data, and the exporter keeps serving GPU metrics meanwhile. The task ends
/// when every receiver of `tx` is gone.
pub async fn spawn(
    client: Client,
    cfg: KubeConfig,
    tx: watch::Sender<SourceState<ClusterView>>,
) -> Result<JoinHandle<()>, KubeSourceError> {
    let node = &cfg.node_name;
    // The name goes into field selectors, where ',' and '=' are syntax.
    if node.is_empty() || node.contains([',', '=', '!']) || node.chars().any(char::is_whitespace) {
        return Err(KubeSourceError::InvalidConfig(format!(
            "node name {node:?} is not a valid node name"
        )));
    }
    for (what, d) in [
        ("publish_every", cfg.publish_every),
        ("resync_every", cfg.resync_every),
        ("request_timeout", cfg.request_timeout),
    ] {
        if d.is_zero() {
            return Err(KubeSourceError::InvalidConfig(format!(
                "{what} must be positive"
            )));
        }
    }
    Ok(tokio::spawn(run(client, cfg, tx)))
}

/// Health of one part, logged once per change.
struct Part {
    name: &'static str,
    /// None until the first attempt finished.
    ok: Option<bool>,
    error: Option<String>,
}

impl Part {
    fn new(name: &'static str) -> Self {
        Self {
            name,
            ok: None,
            error: None,
        }
    }

    fn succeeded(&mut self) {
        if self.ok == Some(false) {
            tracing::info!(part = self.name, "kubernetes source recovered");
        }
        self.ok = Some(true);
    }

    fn failed(&mut self, error: &dyn std::error::Error) {
        let msg = one_line(error);
        if self.ok != Some(false) {
            tracing::warn!(part = self.name, error = %msg, "kubernetes source failing; keeping last data");
        }
        self.ok = Some(false);
        self.error = Some(msg);
    }
}

/// The error and its causes on one bounded line (kube errors nest the API server's Status).
fn one_line(error: &dyn std::error::Error) -> String {
    let mut msg = error.to_string();
    let mut source = error.source();
    while let Some(s) = source {
        let s_msg = s.to_string();
        if !msg.contains(&s_msg) {
            msg = format!("{msg}: {s_msg}");
        }
        source = s.source();
    }
    let mut msg: String = msg
        .chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .collect();
    if msg.len() > MAX_ERROR_LEN {
        let cut = (0..=MAX_ERROR_LEN)
            .rev()
            .find(|i| msg.is_char_boundary(*i))
            .unwrap_or(0);
        msg.truncate(cut);
        msg.push('…');
    }
    msg
}

/// What one round of the resync task read; `None` for parts it did not read this time.
struct Resync {
    node: Option<Result<BTreeMap<String, String>, KubeSourceError>>,
    dra: Option<Result<Vec<DraDevice>, KubeSourceError>>,
    claims: Option<claims::ClaimsRead>,
}

struct Aborting(JoinHandle<()>);

impl Drop for Aborting {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// Node labels, slices and claims, re-read every `resync_every`; claims a pod newly names
/// are read as soon as the pod shows up in `wanted`, without waiting for the next round.
async fn resync_loop(
    client: Client,
    cfg: KubeConfig,
    tx: mpsc::Sender<Resync>,
    mut wanted: watch::Receiver<BTreeSet<claims::ClaimKey>>,
) {
    let nodes: Api<Node> = Api::all(client.clone());
    let mut slices = slices::SliceReader::new(client.clone(), &cfg.node_name);
    let mut claim_reader = claims::ClaimReader::new(client);
    let min_retry = RETRY_MIN.min(cfg.resync_every);
    let mut retry = min_retry;
    loop {
        let node = node::fetch_labels(&nodes, &cfg.node_name, cfg.request_timeout).await;
        let (dra, claims) = if cfg.dra {
            let want = wanted.borrow_and_update().clone();
            (
                Some(slices.fetch(cfg.request_timeout).await),
                Some(claim_reader.fetch(&want, true, cfg.request_timeout).await),
            )
        } else {
            (None, None)
        };
        let failed = node.is_err()
            || matches!(dra, Some(Err(_)))
            || claims.as_ref().is_some_and(|c| c.error.is_some());
        let round = Resync {
            node: Some(node),
            dra,
            claims,
        };
        if tx.send(round).await.is_err() {
            return;
        }
        let wait = if failed {
            let w = retry;
            retry = (retry * 2).min(cfg.resync_every);
            w
        } else {
            retry = min_retry;
            cfg.resync_every
        };
        let next = tokio::time::Instant::now() + wait;
        loop {
            tokio::select! {
                _ = tokio::time::sleep_until(next) => break,
                changed = wanted.changed(), if cfg.dra => {
                    if changed.is_err() {
                        return;
                    }
                    let want = wanted.borrow_and_update().clone();
                    let read = claim_reader.fetch(&want, false, cfg.request_timeout).await;
                    let round = Resync { node: None, dra: None, claims: Some(read) };
                    if tx.send(round).await.is_err() {
                        return;
                    }
                }
            }
        }
    }
}

struct Source {
    cfg: KubeConfig,
    pods: pods::PodWatch,
    /// The current pod store has completed a full list.
    pods_ready: bool,
    pods_part: Part,
    node_part: Part,
    dra_part: Part,
    claims_part: Part,
    node_labels: BTreeMap<String, String>,
    dra_devices: Vec<DraDevice>,
    dra_claims: Vec<DraClaim>,
    /// Claims the pods name, for the resync task to read.
    wanted_claims: watch::Sender<BTreeSet<claims::ClaimKey>>,
    dirty: bool,
    view: Option<Arc<ClusterView>>,
}

async fn run(client: Client, cfg: KubeConfig, tx: watch::Sender<SourceState<ClusterView>>) {
    let pods_api: Api<Pod> = Api::all(client.clone());
    let (resync_tx, mut resync_rx) = mpsc::channel(2);
    let (wanted_claims, wanted_rx) = watch::channel(BTreeSet::new());
    let _resync = Aborting(tokio::spawn(resync_loop(
        client,
        cfg.clone(),
        resync_tx,
        wanted_rx,
    )));
    let mut tick = tokio::time::interval(cfg.publish_every);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut src = Source {
        pods: pods::PodWatch::start(pods_api.clone(), &cfg.node_name),
        cfg,
        pods_ready: false,
        pods_part: Part::new("pods"),
        node_part: Part::new("node"),
        dra_part: Part::new("resourceslices"),
        claims_part: Part::new("resourceclaims"),
        node_labels: BTreeMap::new(),
        dra_devices: Vec::new(),
        dra_claims: Vec::new(),
        wanted_claims,
        dirty: false,
        view: None,
    };
    loop {
        tokio::select! {
            _ = tx.closed() => return,
            ev = src.pods.events.next() => match ev {
                Some(Ok(ev)) => src.on_pod_event(&ev),
                Some(Err(e)) => src.on_pod_error(e, &pods_api),
                // The watcher never ends by itself; if it does, start over rather than stall.
                None => src.restart_pods(&pods_api),
            },
            Some(r) = resync_rx.recv() => src.on_resync(r),
            _ = tick.tick() => src.publish(&tx),
        }
    }
}

impl Source {
    fn on_pod_event(&mut self, ev: &watcher::Event<Pod>) {
        match ev {
            // Emitted before the list request is even sent: proves nothing about the server.
            watcher::Event::Init => return,
            watcher::Event::InitApply(_) => {}
            watcher::Event::InitDone => {
                self.pods_ready = true;
                self.dirty = true;
            }
            watcher::Event::Apply(_) | watcher::Event::Delete(_) => self.dirty = true,
        }
        self.pods_part.succeeded();
    }

    fn on_pod_error(&mut self, e: watcher::Error, api: &Api<Pod>) {
        match &e {
            // Expired resource version: routine (etcd compaction); kube-rs relists by itself.
            watcher::Error::WatchError(s) if s.code == 410 => {
                tracing::debug!("pod watch expired (410); relisting");
            }
            // kube-rs re-watches from the same expired version forever when the 410 comes as
            // an HTTP status instead of a watch event; only a fresh watcher relists.
            watcher::Error::WatchStartFailed(::kube::Error::Api(s)) if s.code == 410 => {
                tracing::debug!("pod watch start expired (HTTP 410); restarting the reflector");
                self.restart_pods(api);
            }
            _ => self.pods_part.failed(&e),
        }
    }

    // The old view stays published until the new store has listed everything, so a restart
    // never shows an empty or partial pod set.
    fn restart_pods(&mut self, api: &Api<Pod>) {
        self.pods = pods::PodWatch::start(api.clone(), &self.cfg.node_name);
        self.pods_ready = false;
    }

    fn on_resync(&mut self, r: Resync) {
        match r.node {
            Some(Ok(labels)) => {
                self.node_part.succeeded();
                if labels != self.node_labels {
                    self.node_labels = labels;
                    self.dirty = true;
                }
            }
            Some(Err(e)) => self.node_part.failed(&e),
            None => {}
        }
        if let Some(read) = r.claims {
            match &read.error {
                Some(e) => self.claims_part.failed(e),
                None => self.claims_part.succeeded(),
            }
            if read.claims != self.dra_claims {
                self.dra_claims = read.claims;
                self.dirty = true;
            }
        }
        match r.dra {
            Some(Ok(devices)) => {
                self.dra_part.succeeded();
                if devices != self.dra_devices {
                    self.dra_devices = devices;
                    self.dirty = true;
                }
            }
            Some(Err(e)) => self.dra_part.failed(&e),
            None => {}
        }
    }

    fn parts(&self) -> impl Iterator<Item = &Part> {
        [&self.pods_part, &self.node_part]
            .into_iter()
            .chain(self.cfg.dra.then_some(&self.dra_part))
            .chain(self.cfg.dra.then_some(&self.claims_part))
    }

    fn publish(&mut self, tx: &watch::Sender<SourceState<ClusterView>>) {
        // The first view waits for one attempt at every part, so consumers never see pods
        // without the node's sharing labels merely because they arrived first.
        let attempted = self.parts().all(|p| p.ok.is_some());
        if self.dirty && self.pods_ready && attempted {
            self.dirty = false;
            let pods: Vec<PodMeta> = self
                .pods
                .store
                .state()
                .iter()
                .map(|p| PodMeta::from_pod(p, &self.cfg.pod_labels))
                .collect();
            if self.cfg.dra {
                let wanted: BTreeSet<claims::ClaimKey> = pods
                    .iter()
                    .flat_map(|p| {
                        p.dra_claims
                            .iter()
                            .map(|c| (p.namespace.clone(), c.clone()))
                    })
                    .collect();
                self.wanted_claims.send_if_modified(|w| {
                    let changed = *w != wanted;
                    *w = wanted;
                    changed
                });
            }
            let view = ClusterView::new(pods, self.node_labels.clone(), self.dra_devices.clone())
                .with_claims(self.dra_claims.clone());
            if self.view.as_deref() != Some(&view) {
                self.view = Some(Arc::new(view));
            }
        }
        let healthy = self.parts().all(|p| p.ok == Some(true));
        let failing: Vec<String> = self
            .parts()
            .filter(|p| p.ok == Some(false))
            .filter_map(|p| Some(format!("{}: {}", p.name, p.error.as_deref()?)))
            .collect();
        let error = (!failing.is_empty()).then(|| failing.join("; "));
        let now = SystemTime::now();
        let data = self.view.clone();
        tx.send_if_modified(|s| {
            let same_data = match (&s.data, &data) {
                (Some(a), Some(b)) => Arc::ptr_eq(a, b),
                (None, None) => true,
                _ => false,
            };
            let notify =
                !same_data || s.healthy != healthy || (error.is_some() && s.last_error != error);
            // Freshness is refreshed silently: readers sample it, and waking every watcher
            // each tick for a timestamp would defeat publishing only on change.
            if healthy && data.is_some() {
                s.last_success = Some(now);
            }
            s.data = data;
            s.healthy = healthy;
            if error.is_some() {
                s.last_error = error;
            }
            notify
        });
    }
}

#[cfg(test)]
mod tests;

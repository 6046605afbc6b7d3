//! Source: the kubelet pod-resources API, which says which container was given which device.
//!
//! A poller task calls `List` on the kubelet's UNIX socket at a fixed interval and publishes
//! plain [`Allocations`] through a `watch` channel. The kubelet restarts, its socket comes
//! and goes, and it rate-limits callers, so the poller reconnects with backoff, keeps serving
//! the last good answer for a bounded time, and logs only when its health changes.

mod client;
mod convert;
mod options;

use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use tokio::sync::watch;
use tokio::task::JoinHandle;
use tokio::time::Instant;
use tracing::{debug, info, warn};

use crate::source::SourceState;

pub use client::{PodResourcesClient, PodResourcesError};
pub use convert::{
    Allocatable, AllocatableDevice, Allocations, ContainerAllocation, DynamicDevice,
    ResourceDevices, MAX_ALLOCATABLE, MAX_CONTAINERS, MAX_FIELD_LEN,
};
pub use options::{KubeletArgs, KubeletOptions};

/// Code generated from `proto/podresources/v1/api.proto`; crate-private so proto types never
/// reach the model.
#[allow(
    dead_code,
    unreachable_pub,
    clippy::all,
    clippy::pedantic,
    missing_docs
)]
pub(crate) mod pb {
    tonic::include_proto!("v1");
}

pub const DEFAULT_SOCKET: &str = "/var/lib/kubelet/pod-resources/kubelet.sock";
pub const DEFAULT_INTERVAL: Duration = Duration::from_secs(5);
pub const DEFAULT_CALL_TIMEOUT: Duration = Duration::from_secs(5);
/// tonic's default decode limit is 4 MiB, which a busy node's `List` answer can exceed.
pub const DEFAULT_MAX_MESSAGE_SIZE: usize = 16 * 1024 * 1024;
pub const DEFAULT_STALE_AFTER: Duration = Duration::from_secs(5 * 60);
/// A kubelet that has just restarted answers `List` before it has read its pods back: on the
/// node tier (kubelet v1.37.2, docs/kubernetes-real-node.md) it listed no pod at all for 1.2 s
/// after its socket came back, then every pod again. So within this long of a restart (its
/// socket recreated), an answer listing no pod after one that listed some is not believed: the
/// last good answer stands, and running pods are not called unallocated. A kubelet that did not
/// restart is believed at once (its last pod was deleted).
pub const DEFAULT_EMPTY_GRACE: Duration = Duration::from_secs(30);
/// The kubelet rate-limits the socket (100 QPS, burst 10) for every client on the node;
/// an exporter has no business polling faster than this.
pub const MIN_INTERVAL: Duration = Duration::from_secs(1);

/// First retry delay after a failure; doubles per failure up to [`MAX_BACKOFF`], but a retry
/// never waits longer than the poll interval.
const INITIAL_BACKOFF: Duration = Duration::from_millis(250);
const MAX_BACKOFF: Duration = Duration::from_secs(30);
/// Guards against a zero interval turning the poller into a busy loop (tests and the demo
/// may go below [`MIN_INTERVAL`]; production config must not).
const FLOOR_INTERVAL: Duration = Duration::from_millis(10);
/// Allocatable devices are re-read after every reconnect and also this often: a device
/// plugin restarted with a new sharing config changes the replica count without the kubelet
/// (and so our connection) restarting.
const ALLOCATABLE_REFRESH: Duration = Duration::from_secs(60);

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PodResourcesConfig {
    /// `--kubelet.pod-resources-socket`
    pub socket: PathBuf,
    pub interval: Duration,
    /// Bounds connect and every RPC.
    pub call_timeout: Duration,
    /// Largest `List` answer accepted, in bytes.
    pub max_message_size: usize,
    /// How long the last good answer is served while the kubelet cannot be reached.
    pub stale_after: Duration,
    /// How long after a kubelet restart an answer listing no pod, after one that listed some,
    /// is held back.
    pub empty_grace: Duration,
}

impl Default for PodResourcesConfig {
    fn default() -> Self {
        Self {
            socket: PathBuf::from(DEFAULT_SOCKET),
            interval: DEFAULT_INTERVAL,
            call_timeout: DEFAULT_CALL_TIMEOUT,
            max_message_size: DEFAULT_MAX_MESSAGE_SIZE,
            stale_after: DEFAULT_STALE_AFTER,
            empty_grace: DEFAULT_EMPTY_GRACE,
        }
    }
}

impl PodResourcesConfig {
    /// Every problem with the configuration, for the config layer to report together.
    pub fn validate(&self) -> Vec<String> {
        let mut problems = Vec::new();
        if self.socket.as_os_str().is_empty() {
            problems.push("kubelet pod-resources socket path is empty".to_string());
        }
        if self.interval < MIN_INTERVAL {
            problems.push(format!(
                "pod-resources poll interval {:?} is below the minimum {MIN_INTERVAL:?} (the kubelet rate-limits this socket)",
                self.interval
            ));
        }
        if self.call_timeout.is_zero() {
            problems.push("pod-resources call timeout must be > 0".to_string());
        }
        if self.max_message_size < 4 * 1024 * 1024 {
            problems.push(format!(
                "pod-resources max message size {} is below 4 MiB",
                self.max_message_size
            ));
        }
        if self.stale_after < self.interval {
            problems.push(format!(
                "pod-resources stale-after {:?} is shorter than the poll interval {:?}",
                self.stale_after, self.interval
            ));
        }
        problems
    }
}

/// Starts polling `List`. The task runs until aborted; it keeps publishing even while no
/// receiver exists, so receivers may subscribe late.
pub fn spawn_poller(
    cfg: PodResourcesConfig,
    tx: watch::Sender<SourceState<Allocations>>,
) -> JoinHandle<()> {
    tokio::spawn(Poller::new(cfg, tx).run())
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Health {
    Unknown,
    Healthy,
    Unhealthy,
}

struct Poller {
    cfg: PodResourcesConfig,
    tx: watch::Sender<SourceState<Allocations>>,
    client: Option<PodResourcesClient>,
    /// Last known allocatable devices; empty until learnt, or when the kubelet lacks the RPC.
    allocatable: Allocatable,
    /// When `allocatable` was fetched on the current connection; `None` means due now.
    allocatable_at: Option<Instant>,
    last_good: Option<(Arc<Allocations>, Instant)>,
    /// The socket file's identity (inode and change time): a new one means a new kubelet.
    socket_id: Option<(u64, i64, i64)>,
    /// When the socket was last seen recreated.
    restarted_at: Option<Instant>,
    last_success: Option<SystemTime>,
    health: Health,
    backoff: Duration,
}

impl Poller {
    fn new(mut cfg: PodResourcesConfig, tx: watch::Sender<SourceState<Allocations>>) -> Self {
        cfg.interval = cfg.interval.max(FLOOR_INTERVAL);
        Self {
            cfg,
            tx,
            client: None,
            allocatable: Allocatable::default(),
            allocatable_at: None,
            last_good: None,
            socket_id: None,
            restarted_at: None,
            last_success: None,
            health: Health::Unknown,
            backoff: INITIAL_BACKOFF,
        }
    }

    async fn run(mut self) {
        loop {
            let started = Instant::now();
            match self.poll_once().await {
                Ok(allocations) if self.still_reading_pods(&allocations) => {
                    self.on_failure(&PodResourcesError::NoPodsYet {
                        grace: self.cfg.empty_grace,
                    });
                    tokio::time::sleep_until(started + self.cfg.interval).await;
                }
                Ok(allocations) => {
                    self.on_success(allocations);
                    self.backoff = INITIAL_BACKOFF;
                    tokio::time::sleep_until(started + self.cfg.interval).await;
                }
                Err(err) => {
                    // Reconnect from scratch next time: after a kubelet restart the old
                    // connection is dead, and a new one also re-reads allocatable devices.
                    self.client = None;
                    self.on_failure(&err);
                    let delay = self.backoff.min(self.cfg.interval);
                    self.backoff = (self.backoff * 2).min(MAX_BACKOFF);
                    tokio::time::sleep(delay).await;
                }
            }
        }
    }

    async fn poll_once(&mut self) -> Result<Allocations, PodResourcesError> {
        self.note_socket().await;
        let client = match &mut self.client {
            Some(client) => client,
            None => {
                let client = PodResourcesClient::connect(&self.cfg).await?;
                self.allocatable_at = None;
                self.client.insert(client)
            }
        };
        let mut allocations = client.list().await?;
        let due = self
            .allocatable_at
            .is_none_or(|at| at.elapsed() >= ALLOCATABLE_REFRESH);
        if due {
            match client.allocatable().await {
                Ok(Some(allocatable)) => {
                    self.allocatable = allocatable;
                    self.allocatable_at = Some(Instant::now());
                }
                Ok(None) => {
                    debug!("kubelet does not implement GetAllocatableResources; replica counts unknown");
                    self.allocatable = Allocatable::default();
                    self.allocatable_at = Some(Instant::now());
                }
                // List worked, so the source is healthy; keep what we knew and retry on the
                // next poll.
                Err(err) => debug!(error = %err, "GetAllocatableResources failed"),
            }
        }
        allocations.allocatable = self.allocatable.devices.clone();
        allocations.skipped += self.allocatable.skipped;
        Ok(allocations)
    }

    /// Remembers the socket's identity; a change means the kubelet restarted, however the
    /// polls fell around its downtime (a poll may miss it, and the channel reconnect quietly).
    async fn note_socket(&mut self) {
        use std::os::unix::fs::MetadataExt;
        let Ok(meta) = tokio::fs::metadata(&self.cfg.socket).await else {
            return;
        };
        let id = (meta.ino(), meta.ctime(), meta.ctime_nsec());
        if self.socket_id.is_some_and(|known| known != id) {
            self.restarted_at = Some(Instant::now());
        }
        self.socket_id = Some(id);
    }

    /// Whether this answer is a restarted kubelet's before it has read its pods back: no pod,
    /// after an answer with some, within `empty_grace` of the restart (see
    /// [`DEFAULT_EMPTY_GRACE`]). The answer must be the whole `List`: nothing skipped by a cap.
    fn still_reading_pods(&self, allocations: &Allocations) -> bool {
        let lists_none = allocations.containers.is_empty() && allocations.skipped == 0;
        let listed_some = self
            .last_good
            .as_ref()
            .is_some_and(|(data, _)| !data.containers.is_empty());
        let restarted = self
            .restarted_at
            .is_some_and(|at| at.elapsed() < self.cfg.empty_grace);
        lists_none && listed_some && restarted
    }

    fn on_success(&mut self, allocations: Allocations) {
        match self.health {
            Health::Unhealthy => info!(
                socket = %self.cfg.socket.display(),
                containers = allocations.containers.len(),
                "kubelet pod-resources source recovered"
            ),
            Health::Unknown => info!(
                socket = %self.cfg.socket.display(),
                containers = allocations.containers.len(),
                "kubelet pod-resources source connected"
            ),
            Health::Healthy => {}
        }
        if allocations.skipped > 0 {
            debug!(
                skipped = allocations.skipped,
                "pod-resources entries over sanity caps were skipped"
            );
        }
        self.health = Health::Healthy;
        let data = Arc::new(allocations);
        let now = SystemTime::now();
        self.last_good = Some((Arc::clone(&data), Instant::now()));
        self.last_success = Some(now);
        self.tx.send_replace(SourceState {
            data: Some(data),
            last_success: Some(now),
            healthy: true,
            last_error: None,
        });
    }

    fn on_failure(&mut self, err: &PodResourcesError) {
        let reason = err.to_string();
        if self.health == Health::Unhealthy {
            debug!(error = %reason, "kubelet pod-resources source still failing");
        } else {
            warn!(
                socket = %self.cfg.socket.display(),
                error = %reason,
                stale_after = ?self.cfg.stale_after,
                "kubelet pod-resources source failing; keeping last good data for a bounded time"
            );
        }
        self.health = Health::Unhealthy;
        let data = match &self.last_good {
            Some((data, at)) if at.elapsed() < self.cfg.stale_after => Some(Arc::clone(data)),
            Some(_) => {
                warn!(
                    stale_after = ?self.cfg.stale_after,
                    "kubelet pod-resources data is stale; dropping it"
                );
                self.last_good = None;
                None
            }
            None => None,
        };
        self.tx.send_replace(SourceState {
            data,
            last_success: self.last_success,
            healthy: false,
            last_error: Some(reason),
        });
    }
}

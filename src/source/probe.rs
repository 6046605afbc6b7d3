//! Receives the CUDA probe's counters (`crates/probe`) on a UNIX stream socket.
//!
//! Each workload process that carries the probe connects once and sends fixed-size frames with
//! its cumulative kernel busy time and kernel count. The sender's PID is not taken from the
//! frame: the kernel attests it (`SO_PEERCRED`, in tessera's PID namespace, which is the
//! host's with `hostPID`), so a process can speak only for itself. tessera never writes to
//! the socket, and counters of PIDs NVML does not list on a GPU are never shown.

use std::collections::{HashMap, VecDeque};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tokio::io::AsyncReadExt;
use tokio::net::{UnixListener, UnixStream};
use tokio::task::JoinHandle;

use crate::model::compute::ProbeReading;

pub use tessera_probe::wire::{Frame, FLAG_DISABLED, FRAME_LEN};

/// More connections than any node runs GPU processes; past this new ones are refused.
const MAX_CONNECTIONS: usize = 4096;
/// Reports kept per process: enough to span the window at one report a second.
const MAX_REPORTS: usize = 32;
/// At most ten reports a second are read from one peer.
const MIN_FRAME_GAP: Duration = Duration::from_millis(100);
/// A process that stopped reporting is forgotten after this.
const FORGET_AFTER: Duration = Duration::from_secs(30);

#[derive(Debug, Default)]
struct PidReports {
    reports: VecDeque<(Instant, Frame)>,
    disabled: bool,
}

/// What the receiver has heard, shared with the sampler thread.
#[derive(Debug, Default, Clone)]
pub struct ProbeBook {
    inner: Arc<Mutex<HashMap<u32, PidReports>>>,
}

impl ProbeBook {
    /// Files one report of `pid`'s probe. The socket receiver calls it with the kernel-attested
    /// sender; the demo with its fake processes.
    pub fn record(&self, pid: u32, frame: Frame, at: Instant) {
        let Ok(mut map) = self.inner.lock() else {
            return;
        };
        if !map.contains_key(&pid) && map.len() >= MAX_CONNECTIONS {
            return;
        }
        let e = map.entry(pid).or_default();
        // Counters only grow within one process; a smaller one is a new process under a
        // reused PID (or a lie), and history before it means nothing.
        if e.reports
            .back()
            .is_some_and(|(_, f)| frame.busy_ns < f.busy_ns || frame.kernels < f.kernels)
        {
            e.reports.clear();
        }
        e.disabled = frame.flags & FLAG_DISABLED != 0;
        e.reports.push_back((at, frame));
        while e.reports.len() > MAX_REPORTS {
            e.reports.pop_front();
        }
    }

    /// Readings over the trailing `window` for the PIDs asked for; drops stale processes.
    pub fn readings(
        &self,
        pids: &[u32],
        window: Duration,
        now: Instant,
    ) -> HashMap<u32, ProbeReading> {
        let Ok(mut map) = self.inner.lock() else {
            return HashMap::new();
        };
        map.retain(|_, r| {
            r.reports
                .back()
                .is_some_and(|(t, _)| now.saturating_duration_since(*t) < FORGET_AFTER)
        });
        pids.iter()
            .filter_map(|pid| {
                let r = map.get(pid)?;
                if r.disabled {
                    return None;
                }
                let (t1, last) = *r.reports.back()?;
                let first = r
                    .reports
                    .iter()
                    .find(|(t, _)| t1.saturating_duration_since(*t) <= window)
                    .copied();
                let busy_ratio = first.and_then(|(t0, f0)| {
                    let dt = t1.saturating_duration_since(t0).as_secs_f64();
                    // Two reports at least a second apart, and the newest one recent.
                    (dt >= 1.0 && now.saturating_duration_since(t1) <= window).then(|| {
                        (last.busy_ns.saturating_sub(f0.busy_ns) as f64 / 1e9 / dt).clamp(0.0, 1.0)
                    })
                });
                Some((
                    *pid,
                    ProbeReading {
                        busy_ratio,
                        busy_seconds: last.busy_ns as f64 / 1e9,
                        kernels: last.kernels,
                    },
                ))
            })
            .collect()
    }
}

#[derive(Debug, thiserror::Error)]
pub enum ProbeSocketError {
    #[error("cannot listen for the CUDA probe on {}: {source}", path.display())]
    Bind {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
}

/// Binds the socket (replacing a stale one) so that any local user may connect: workload
/// containers run as arbitrary users, and each can only report for itself.
fn bind(path: &Path) -> Result<UnixListener, ProbeSocketError> {
    let err = |source| ProbeSocketError::Bind {
        path: path.to_path_buf(),
        source,
    };
    // Only a stale socket of an earlier run is replaced; anything else at the path is an error
    // to report, never a file to delete.
    use std::os::unix::fs::FileTypeExt;
    match std::fs::symlink_metadata(path) {
        Ok(m) if m.file_type().is_socket() => std::fs::remove_file(path).map_err(err)?,
        Ok(_) => {
            return Err(err(std::io::Error::new(
                std::io::ErrorKind::AlreadyExists,
                "a file that is not a socket is in the way",
            )))
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => return Err(err(e)),
    }
    let listener = UnixListener::bind(path).map_err(err)?;
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o666)).map_err(err)?;
    Ok(listener)
}

/// Starts the receiver on the current runtime.
pub fn spawn_receiver(path: &Path, book: ProbeBook) -> Result<JoinHandle<()>, ProbeSocketError> {
    let listener = bind(path)?;
    let live = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    Ok(tokio::spawn(async move {
        loop {
            let stream = match listener.accept().await {
                Ok((s, _)) => s,
                Err(e) => {
                    tracing::debug!(error = %e, "probe socket accept failed");
                    tokio::time::sleep(Duration::from_millis(100)).await;
                    continue;
                }
            };
            if live.load(std::sync::atomic::Ordering::Relaxed) >= MAX_CONNECTIONS {
                continue;
            }
            let Some(pid) = stream
                .peer_cred()
                .ok()
                .and_then(|c| c.pid())
                .and_then(|p| u32::try_from(p).ok())
            else {
                continue;
            };
            let book = book.clone();
            let live = live.clone();
            live.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            tokio::spawn(async move {
                read_frames(stream, pid, &book).await;
                live.fetch_sub(1, std::sync::atomic::Ordering::Relaxed);
            });
        }
    }))
}

async fn read_frames(mut stream: UnixStream, pid: u32, book: &ProbeBook) {
    let mut buf = [0u8; FRAME_LEN];
    loop {
        if stream.read_exact(&mut buf).await.is_err() {
            return;
        }
        match Frame::decode(&buf) {
            Some(f) => book.record(pid, f, Instant::now()),
            // Not our protocol: stop listening to this peer.
            None => return,
        }
        // The probe reports once a second; a peer that floods is slowed to this pace by its
        // own full socket buffer instead of costing tessera CPU.
        tokio::time::sleep(MIN_FRAME_GAP).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::AsyncWriteExt;

    fn frame(busy_ms: u64, kernels: u64) -> Frame {
        Frame {
            busy_ns: busy_ms * 1_000_000,
            kernels,
            flags: 0,
            dropped: 0,
        }
    }

    #[test]
    fn busy_ratio_over_the_window_and_a_reused_pid_restarts() {
        let book = ProbeBook::default();
        let t0 = Instant::now();
        for s in 0..=6u64 {
            book.record(7, frame(400 * s, 10 * s), t0 + Duration::from_secs(s));
        }
        let now = t0 + Duration::from_secs(6);
        let r = book.readings(&[7, 8], Duration::from_secs(5), now);
        assert_eq!(r.len(), 1, "pid 8 never reported");
        let r7 = r[&7];
        assert!((r7.busy_ratio.unwrap() - 0.4).abs() < 1e-9);
        assert_eq!(r7.kernels, 60);
        // A smaller counter: history is dropped, no ratio until a second report.
        book.record(7, frame(10, 1), now + Duration::from_secs(1));
        let r = book.readings(&[7], Duration::from_secs(5), now + Duration::from_secs(1));
        assert_eq!(r[&7].busy_ratio, None);
        // Silent for longer than the window: no ratio; longer still: forgotten.
        let later = now + Duration::from_secs(40);
        assert!(book
            .readings(&[7], Duration::from_secs(5), later)
            .is_empty());
    }

    #[test]
    fn a_disabled_probe_says_nothing() {
        let book = ProbeBook::default();
        let t0 = Instant::now();
        book.record(3, frame(0, 0), t0);
        let mut f = frame(500, 5);
        f.flags = FLAG_DISABLED;
        book.record(3, f, t0 + Duration::from_secs(2));
        assert!(book
            .readings(&[3], Duration::from_secs(5), t0 + Duration::from_secs(2))
            .is_empty());
    }

    #[tokio::test]
    async fn the_kernel_names_the_sender() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("probe.sock");
        let book = ProbeBook::default();
        let task = spawn_receiver(&path, book.clone()).unwrap();
        let mut c = UnixStream::connect(&path).await.unwrap();
        c.write_all(&frame(100, 1).encode()).await.unwrap();
        c.write_all(&frame(900, 9).encode()).await.unwrap();
        // Garbage ends the conversation without touching what was recorded.
        c.write_all(&[0xff; FRAME_LEN]).await.unwrap();
        let me = std::process::id();
        for _ in 0..100 {
            let r = book.readings(&[me], Duration::from_secs(5), Instant::now());
            if r.get(&me).is_some_and(|r| r.kernels == 9) {
                task.abort();
                return;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        panic!("no report recorded for pid {me}");
    }

    #[tokio::test]
    async fn only_a_stale_socket_is_replaced() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("probe.sock");
        std::fs::write(&path, b"not a socket").unwrap();
        let e = spawn_receiver(&path, ProbeBook::default())
            .map(|_| ())
            .unwrap_err();
        assert!(e.to_string().contains("not a socket"), "{e}");
        assert_eq!(std::fs::read(&path).unwrap(), b"not a socket");
        std::fs::remove_file(&path).unwrap();
        let first = spawn_receiver(&path, ProbeBook::default()).unwrap();
        first.abort();
        // A socket left behind by an earlier run is replaced.
        spawn_receiver(&path, ProbeBook::default()).unwrap().abort();
    }
}

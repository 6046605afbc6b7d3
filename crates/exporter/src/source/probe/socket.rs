//! The probe's socket: bound so any local user may connect, one reading task per peer, frames
//! read with a bounded header and body and filed under the kernel-attested sender; and per
//! peer a writing task that sends the probe a control message when its device starts or stops
//! being shared.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::unix::{OwnedReadHalf, OwnedWriteHalf};
use tokio::net::UnixListener;
use tokio::task::JoinHandle;

use tessera_probe::wire::{Control, Frame, HEADER_LEN};

use super::{ProbeBook, Refusal, MAX_CONNECTIONS};

/// At most ten reports a second are read from one peer.
const MIN_FRAME_GAP: Duration = Duration::from_millis(100);
/// A peer that leaves a 16-byte message unread this long gets no more.
const CONTROL_WRITE_TIMEOUT: Duration = Duration::from_secs(1);

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
    // to report, never a file to delete. A socket someone still accepts on belongs to another
    // running tessera: taking it over would silently starve that one.
    use std::os::unix::fs::FileTypeExt;
    match std::fs::symlink_metadata(path) {
        // Connecting to a UNIX socket answers at once (accepted or refused); it never waits.
        Ok(m)
            if m.file_type().is_socket()
                && std::os::unix::net::UnixStream::connect(path).is_ok() =>
        {
            return Err(err(std::io::Error::new(
                std::io::ErrorKind::AddrInUse,
                "another process is listening on it",
            )))
        }
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
                let (read, write) = stream.into_split();
                let writer = tokio::spawn(send_control(write, pid, book.clone()));
                read_frames(read, pid, &book).await;
                writer.abort();
                live.fetch_sub(1, std::sync::atomic::Ordering::Relaxed);
            });
        }
    }))
}

/// Tells `pid`'s probe whether its device is shared, whenever the sampler's answer differs
/// from what the probe was last told. A probe starts every connection with records off, so
/// nothing is sent to a process alone.
async fn send_control(mut stream: OwnedWriteHalf, pid: u32, book: ProbeBook) {
    let mut changed = book.watch_records();
    let mut told = false;
    loop {
        let want = book.records_wanted(pid);
        if want != told {
            let msg = Control { shared: want }.encode();
            match tokio::time::timeout(CONTROL_WRITE_TIMEOUT, stream.write_all(&msg)).await {
                Ok(Ok(())) => told = want,
                // Gone, or not reading: the reading task ends the connection or carries on.
                _ => return,
            }
        }
        if changed.changed().await.is_err() {
            return;
        }
    }
}

async fn read_frames(mut stream: OwnedReadHalf, pid: u32, book: &ProbeBook) {
    let mut head = [0u8; HEADER_LEN];
    let mut body = Vec::new();
    loop {
        if stream.read_exact(&mut head[..8]).await.is_err() {
            return;
        }
        // Not our protocol: stop listening to this peer.
        let Some(rest) = head[..8].try_into().ok().and_then(Frame::rest_of_header) else {
            book.refuse(Refusal::Malformed);
            return;
        };
        if stream.read_exact(&mut head[8..8 + rest]).await.is_err() {
            return;
        }
        let Some(h) = Frame::decode_header(&head[..8 + rest]) else {
            book.refuse(Refusal::Malformed);
            return;
        };
        body.resize(h.bucket_bytes, 0);
        if stream.read_exact(&mut body).await.is_err() {
            return;
        }
        book.record(
            pid,
            &h.frame.with_buckets(&body, h.bucket_len),
            Instant::now(),
        );
        // The probe reports once a second; a peer that floods is slowed to this pace by its
        // own full socket buffer instead of costing tessera CPU.
        tokio::time::sleep(MIN_FRAME_GAP).await;
    }
}

#[cfg(test)]
#[path = "socket_tests.rs"]
mod tests;

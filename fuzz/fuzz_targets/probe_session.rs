//! Whole sessions on tessera's probe socket, as any tenant pod that mounts it may open them:
//! up to four connections at once, each writing any bytes (in pieces, interleaved with the
//! others), then closing or leaving. The receiver is the one tessera runs
//! (`source::probe::spawn_receiver`), on a clock paused so that its per-frame pacing costs no
//! real time. Afterwards the receiver still runs and accepts, what it filed is under this
//! process's kernel-attested PID only, and its readings lie in range.
#![no_main]

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use libfuzzer_sys::fuzz_target;
use tessera_exporter::source::probe::{spawn_receiver, ProbeBook};
use tokio::io::AsyncWriteExt;
use tokio::net::UnixStream;

static SESSION: AtomicU64 = AtomicU64::new(0);

fn socket_dir() -> std::path::PathBuf {
    std::env::temp_dir().join(format!("tessera-fuzz-session-{}", std::process::id()))
}

fuzz_target!(|data: &[u8]| {
    let Some((&shape, rest)) = data.split_first() else {
        return;
    };
    // Bits 0-1: connections (1..=4); bits 2-4: write piece size (1 << n bytes, from 1 to 128);
    // bit 5: the last connection stays open past the end; bit 6: connections close their
    // write side (a clean end) rather than dropping the stream.
    let conns = usize::from(shape & 3) + 1;
    let piece = 1usize << ((shape >> 2) & 7);
    let linger = shape & 0x20 != 0;
    let clean = shape & 0x40 != 0;
    let chunk = rest.len().div_ceil(conns).max(1);
    let parts: Vec<&[u8]> = rest.chunks(chunk).collect();

    let dir = socket_dir();
    std::fs::create_dir_all(&dir).expect("socket dir");
    let path = dir.join(format!("s{}.sock", SESSION.fetch_add(1, Ordering::Relaxed)));
    let book = ProbeBook::new(Duration::from_secs(2));
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .start_paused(true)
        .build()
        .expect("runtime");
    let me = std::process::id();
    rt.block_on(async {
        let receiver = spawn_receiver(&path, book.clone()).expect("bind");
        let mut streams = Vec::new();
        for _ in 0..conns {
            streams.push(UnixStream::connect(&path).await.expect("connect"));
        }
        // Round-robin pieces across the connections, as concurrent tenants' writes arrive.
        let mut offsets = vec![0usize; conns];
        let mut open = vec![true; conns];
        loop {
            let mut wrote = false;
            for (i, s) in streams.iter_mut().enumerate() {
                let Some(part) = parts.get(i) else { continue };
                if !open[i] || offsets[i] >= part.len() {
                    continue;
                }
                let end = (offsets[i] + piece).min(part.len());
                // The receiver stops reading a peer that breaks the protocol; a write to it
                // may then fail, as a tenant's would.
                if s.write_all(&part[offsets[i]..end]).await.is_err() {
                    open[i] = false;
                }
                offsets[i] = end;
                wrote = true;
            }
            if !wrote {
                break;
            }
            tokio::task::yield_now().await;
        }
        let kept = if linger { streams.pop() } else { None };
        for mut s in streams {
            if clean {
                let _ = s.shutdown().await;
            }
            drop(s);
        }
        // Paused: this advances only while every task waits, past each frame's pacing.
        tokio::time::sleep(Duration::from_secs(600)).await;
        assert!(
            !receiver.is_finished(),
            "the receiver stopped after a session"
        );
        // A hostile session never stops the socket serving the next tenant.
        let next = UnixStream::connect(&path).await;
        assert!(next.is_ok(), "the receiver no longer accepts");
        drop(kept);
        receiver.abort();
    });
    drop(rt);
    let _ = std::fs::remove_file(&path);

    let now = Instant::now();
    let others: Vec<u32> = [0, 1, me.wrapping_add(1), u32::MAX]
        .into_iter()
        .filter(|&p| p != me)
        .collect();
    assert!(
        book.readings(&others, now).is_empty() && book.timelines(&others, now).is_empty(),
        "a report was filed under a PID other than its sender's"
    );
    for r in book.readings(&[me], now).values() {
        assert!(r.busy_ratio.is_none_or(|b| (0.0..=1.0).contains(&b)));
        assert!(r.traced_share.is_none_or(|t| (0.0..=1.0).contains(&t)));
        assert!(r.busy_seconds.is_finite() && r.busy_seconds >= 0.0);
    }
    for t in book.timelines(&[me], now).values() {
        assert!(t.covered.len() <= 2_000 && t.covered.len() == t.traced.len());
        assert!(t
            .covered
            .iter()
            .chain(&t.solo)
            .all(|v| (0.0..=1.0).contains(v)));
    }
});

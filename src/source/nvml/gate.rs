//! One GPM call at a time in this process (docs/reliability.md, "GPM and several GPUs").
//!
//! On a 2 × H100 host (driver 580.159.04) two GPUs' workers sampling GPM at once faulted inside
//! `libnvidia-ml.so.1` (one thread in `nvmlGpmMetricsGet`, the other in `nvmlGpmSampleGet`),
//! while the same build with GPM serialized never did. The gate serializes GPM alone: every
//! other call stays parallel, so a GPU whose driver calls hang still leaves the others their
//! figures. A GPM call that hangs holds the gate, so waiting for it is bounded: a GPU that
//! cannot get the gate in time reports GPM unavailable (`gpm_gate_busy`) for that sample and
//! keeps every other figure.

use std::sync::{Condvar, Mutex};
use std::time::Duration;

use nvml_wrapper::gpm::GpmSample;

/// How long a worker waits for another GPU's GPM call; GPM calls take microseconds, so only a
/// hung one makes a worker wait this long, and the sample still fits inside `--nvml.timeout`.
pub const GATE_WAIT: Duration = Duration::from_millis(250);

/// The reason a GPU reports when another GPU's GPM call held the gate past [`GATE_WAIT`].
pub const GATE_BUSY: &str = "gpm_gate_busy";

struct Gate {
    held: Mutex<bool>,
    released: Condvar,
}

static GATE: Gate = Gate {
    held: Mutex::new(false),
    released: Condvar::new(),
};

/// Releases the gate when dropped, so a panicking call does not keep it closed.
struct Held;

impl Drop for Held {
    fn drop(&mut self) {
        let mut held = GATE.held.lock().unwrap_or_else(|e| e.into_inner());
        *held = false;
        GATE.released.notify_one();
    }
}

fn enter(wait: Duration) -> Option<Held> {
    let held = GATE.held.lock().unwrap_or_else(|e| e.into_inner());
    let (mut held, _) = GATE
        .released
        .wait_timeout_while(held, wait, |h| *h)
        .unwrap_or_else(|e| e.into_inner());
    if *held {
        return None;
    }
    *held = true;
    Some(Held)
}

/// Runs `f` while no other GPM call runs in this process; `None` when the gate stayed closed
/// for `wait` (another GPU's GPM call is stuck).
pub fn serialized<T>(wait: Duration, f: impl FnOnce() -> T) -> Option<T> {
    let _held = enter(wait)?;
    Some(f())
}

/// A kept GPM sample. Freeing one is a GPM call too (`nvmlGpmSampleFree`), so it is freed under
/// the gate; if the gate stays closed the sample is leaked rather than freed in a race.
#[derive(Default)]
pub struct GpmSlot(pub Option<GpmSample<'static>>);

impl Drop for GpmSlot {
    fn drop(&mut self) {
        if self.0.is_none() {
            return;
        }
        let free = || {
            super::isolate::crash_note::set_call("gpm_sample_free");
            drop(self.0.take());
        };
        if serialized(GATE_WAIT, free).is_none() {
            tracing::debug!("GPM gate busy: a kept GPM sample is leaked, not freed");
            std::mem::forget(self.0.take());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
    use std::sync::Arc;
    use std::time::Instant;

    // The gate is process-wide; these tests share it, so they run under one lock of their own.
    static SERIAL: Mutex<()> = Mutex::new(());

    #[test]
    fn calls_never_overlap() {
        let _t = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
        let inside = Arc::new(AtomicUsize::new(0));
        let overlapped = Arc::new(AtomicBool::new(false));
        std::thread::scope(|s| {
            for _ in 0..4 {
                let inside = inside.clone();
                let overlapped = overlapped.clone();
                s.spawn(move || {
                    for _ in 0..200 {
                        serialized(Duration::from_secs(5), || {
                            if inside.fetch_add(1, Ordering::SeqCst) > 0 {
                                overlapped.store(true, Ordering::SeqCst);
                            }
                            std::thread::yield_now();
                            inside.fetch_sub(1, Ordering::SeqCst);
                        })
                        .expect("the gate opens within 5 s");
                    }
                });
            }
        });
        assert!(!overlapped.load(Ordering::SeqCst));
    }

    #[test]
    fn a_stuck_holder_costs_others_a_bounded_wait_not_a_hang() {
        let _t = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
        let (release, stuck) = std::sync::mpsc::channel::<()>();
        let (entered, inside) = std::sync::mpsc::channel::<()>();
        let holder = std::thread::spawn(move || {
            serialized(Duration::from_secs(5), || {
                let _ = entered.send(());
                let _ = stuck.recv();
            })
        });
        inside.recv().expect("the holder entered");
        let started = Instant::now();
        assert!(serialized(Duration::from_millis(50), || ()).is_none());
        assert!(started.elapsed() < Duration::from_secs(2));
        let _ = release.send(());
        assert!(holder.join().expect("holder").is_some());
        assert!(serialized(Duration::from_millis(50), || ()).is_some());
    }

    #[test]
    fn a_panicking_call_opens_the_gate_again() {
        let _t = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
        let r = std::panic::catch_unwind(|| serialized(GATE_WAIT, || panic!("inside NVML")));
        assert!(r.is_err());
        assert!(serialized(Duration::from_millis(50), || ()).is_some());
    }
}

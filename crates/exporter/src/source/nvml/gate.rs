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
#[path = "gate_tests.rs"]
mod tests;

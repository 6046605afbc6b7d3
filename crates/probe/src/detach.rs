//! Detaching CUPTI between traced slots, so that a throttled process pays nothing while
//! untraced.
//!
//! Turning kernel records off is not enough: measured on an H100, a launch-bound loop traced
//! 1/32 of the time still ran 15 % slower than without the probe, about as slow as traced
//! 1/8 — CUPTI, once attached, stays on every launch's path. `cuptiFinalize` takes it off,
//! and any later CUPTI call attaches it again. CUPTI documents finalize as safe only at the
//! exit of a CUDA API call (other threads may be inside CUPTI otherwise), so the probe asks
//! for the detach by subscribing to API callbacks for that moment only: the first API call
//! any thread of the process returns from performs it and the subscription goes with it.
//!
//! The hand-over between the probe's thread and the process's threads is this state machine;
//! every step is one compare-and-swap, so a request and its cancellation cannot both win.

use std::sync::atomic::{AtomicU8, Ordering};

/// CUPTI is attached (records on or off).
pub const ATTACHED: u8 = 0;
/// A detach is asked for: the next API exit performs it.
pub const REQUESTED: u8 = 1;
/// An application thread is inside `cuptiFinalize`.
pub const FINALIZING: u8 = 2;
/// CUPTI is off the process; the next traced slot attaches it again.
pub const DETACHED: u8 = 3;

#[derive(Debug)]
pub struct Attachment(AtomicU8);

impl Default for Attachment {
    fn default() -> Self {
        Self::new()
    }
}

impl Attachment {
    pub const fn new() -> Self {
        Attachment(AtomicU8::new(ATTACHED))
    }

    pub fn state(&self) -> u8 {
        self.0.load(Ordering::Acquire)
    }

    fn step(&self, from: u8, to: u8) -> bool {
        self.0
            .compare_exchange(from, to, Ordering::AcqRel, Ordering::Acquire)
            .is_ok()
    }

    /// The probe's thread, at the end of a traced stretch.
    pub fn request(&self) -> bool {
        self.step(ATTACHED, REQUESTED)
    }

    /// An application thread at an API exit: true for exactly one thread per request.
    pub fn claim(&self) -> bool {
        self.step(REQUESTED, FINALIZING)
    }

    /// The claiming thread, after `cuptiFinalize` returned: `ok` false leaves CUPTI attached.
    pub fn finished(&self, ok: bool) {
        self.0
            .store(if ok { DETACHED } else { ATTACHED }, Ordering::Release);
    }

    /// The probe's thread, when a traced slot comes before any API exit did: the request is
    /// withdrawn unless a thread has already claimed it.
    pub fn cancel(&self) -> bool {
        self.step(REQUESTED, ATTACHED)
    }

    /// The probe's thread, once CUPTI is attached again.
    pub fn reattached(&self) -> bool {
        self.step(DETACHED, ATTACHED)
    }
}

/// Whether CUPTI's clock is the system's real-time clock, judged from readings of both.
/// While detached the probe must not call CUPTI (any call attaches it), so it follows the
/// schedule and stamps frames with `CLOCK_REALTIME` — which CUPTI documents as its Linux
/// default — but only when the two agree to within `tolerance_ns`.
pub fn same_clock(
    realtime_before: u64,
    cupti: u64,
    realtime_after: u64,
    tolerance_ns: u64,
) -> bool {
    realtime_before <= realtime_after
        && cupti + tolerance_ns >= realtime_before
        && cupti <= realtime_after + tolerance_ns
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_request_is_either_performed_or_withdrawn_never_both() {
        let a = Attachment::new();
        assert!(a.request());
        assert!(!a.request(), "one request at a time");
        assert!(a.claim());
        assert!(!a.claim(), "only one thread finalizes");
        assert!(!a.cancel(), "too late to withdraw a claimed request");
        assert_eq!(a.state(), FINALIZING);
        assert!(!a.reattached(), "not detached until finalize returned");
        a.finished(true);
        assert_eq!(a.state(), DETACHED);
        assert!(!a.request());
        assert!(a.reattached());
        assert_eq!(a.state(), ATTACHED);
        // Withdrawn before any API exit: nobody may claim it afterwards.
        assert!(a.request());
        assert!(a.cancel());
        assert!(!a.claim());
        // A finalize that failed leaves CUPTI attached.
        assert!(a.request() && a.claim());
        a.finished(false);
        assert_eq!(a.state(), ATTACHED);
    }

    #[test]
    fn racing_threads_claim_a_request_once() {
        let a = std::sync::Arc::new(Attachment::new());
        for _ in 0..200 {
            assert!(a.request());
            let winners: usize = (0..4)
                .map(|_| {
                    let a = a.clone();
                    std::thread::spawn(move || usize::from(a.claim()))
                })
                .collect::<Vec<_>>()
                .into_iter()
                .map(|t| t.join().unwrap_or(0))
                .sum::<usize>()
                + usize::from(a.cancel());
            assert_eq!(winners, 1);
            if a.state() == FINALIZING {
                a.finished(true);
                assert!(a.reattached());
            }
        }
    }

    #[test]
    fn clocks_agree_only_within_the_tolerance() {
        let ms = 1_000_000;
        assert!(same_clock(100 * ms, 100 * ms + 5, 100 * ms + 10, 0));
        assert!(same_clock(100 * ms, 99 * ms, 100 * ms + 10, 2 * ms));
        // CUPTI on another clock (e.g. monotonic since boot) is far off.
        assert!(!same_clock(
            1_700_000_000 * 1000 * ms,
            5_000 * ms,
            1_700_000_000 * 1000 * ms,
            ms
        ));
        assert!(!same_clock(100 * ms, 103 * ms, 100 * ms + 10, 2 * ms));
        // A step of the wall clock between the two reads.
        assert!(!same_clock(100 * ms, 100 * ms, 90 * ms, ms));
    }
}

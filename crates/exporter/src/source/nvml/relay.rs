//! One request out to a thread that answers it (a GPU's sampling thread, or the supervisor of a
//! worker process), and its answer awaited with a deadline. A driver call that hangs stalls
//! only the thread that made it: the sampler stops waiting at the deadline, does not ask again
//! while the request is out, and once it has missed a deadline does not wait for it again.

use std::sync::mpsc::{channel, Receiver, RecvTimeoutError, Sender, TryRecvError};
use std::time::{Duration, Instant};

pub struct Relay<T> {
    requests: Sender<bool>,
    replies: Receiver<T>,
    /// A request is out and not answered yet.
    busy: bool,
    /// The request out has already missed a deadline (its call is stuck).
    overdue: bool,
}

/// What [`Relay::request`] found of the request before.
pub enum Before<T> {
    /// Nothing was out, or its answer had come in time.
    Settled,
    /// The answer to a request that missed its deadline; it describes the past.
    Late(T),
    /// Still out: no new request was sent.
    StillOut,
}

impl<T: Send + 'static> Relay<T> {
    /// Starts `serve` on a thread named `name`; it answers each request on its receiver (the
    /// slow calls are due or not) with one reply, until the relay is dropped.
    pub fn spawn(
        name: String,
        serve: impl FnOnce(Receiver<bool>, Sender<T>) + Send + 'static,
    ) -> std::io::Result<Self> {
        let (requests, jobs) = channel();
        let (answers, replies) = channel();
        std::thread::Builder::new()
            .name(name)
            .spawn(move || serve(jobs, answers))?;
        Ok(Relay {
            requests,
            replies,
            busy: false,
            overdue: false,
        })
    }

    /// Asks for a fresh answer unless the previous request is still out.
    pub fn request(&mut self, slow_due: bool) -> Before<T> {
        let mut before = Before::Settled;
        if self.busy {
            match self.replies.try_recv() {
                Ok(late) => before = Before::Late(late),
                Err(TryRecvError::Empty) => return Before::StillOut,
                Err(TryRecvError::Disconnected) => {
                    self.busy = false;
                    return Before::StillOut;
                }
            }
        }
        self.busy = self.requests.send(slow_due).is_ok();
        self.overdue = false;
        before
    }

    /// The answer, waiting until `deadline` (not at all for a request that already missed
    /// one); `None` when it is late.
    pub fn collect(&mut self, deadline: Instant) -> Option<T> {
        if !self.busy {
            return None;
        }
        let wait = if self.overdue {
            Duration::ZERO
        } else {
            deadline.saturating_duration_since(Instant::now())
        };
        match self.replies.recv_timeout(wait) {
            Ok(reply) => {
                self.busy = false;
                Some(reply)
            }
            Err(RecvTimeoutError::Timeout) | Err(RecvTimeoutError::Disconnected) => {
                self.overdue = true;
                None
            }
        }
    }
}

#[cfg(test)]
#[path = "relay_tests.rs"]
mod tests;

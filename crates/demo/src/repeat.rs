//! The demo's background feeds (fake CPU time, a fake probe) each run a step every so often
//! until the demo ends; this is that thread, stopped and joined when dropped.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

pub struct Repeating {
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl Repeating {
    /// Calls `step` with the time since the start every `every`, on a thread named `name`.
    pub fn start(
        name: &str,
        every: Duration,
        mut step: impl FnMut(Duration) + Send + 'static,
    ) -> std::io::Result<Repeating> {
        let stop = Arc::new(AtomicBool::new(false));
        let flag = stop.clone();
        let thread = std::thread::Builder::new()
            .name(name.into())
            .spawn(move || {
                let started = Instant::now();
                while !flag.load(Ordering::Relaxed) {
                    std::thread::sleep(every);
                    step(started.elapsed());
                }
            })?;
        Ok(Repeating {
            stop,
            thread: Some(thread),
        })
    }
}

impl Drop for Repeating {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

#[cfg(test)]
#[path = "repeat_tests.rs"]
mod tests;

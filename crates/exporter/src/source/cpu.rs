//! CPU time of GPU processes over a trailing window, from procfs. A process that launches
//! kernels spends CPU doing so; one that spent none cannot be the one keeping a GPU busy.

use std::collections::{HashMap, VecDeque};
use std::path::Path;
use std::time::{Duration, Instant};

use super::procfs::{clock_ticks_per_second, process_cpu_ticks, CpuTicks};

/// Readings kept per process; at one a second this covers any sane window.
const MAX_READINGS: usize = 64;

#[derive(Debug)]
struct History {
    start: u64,
    readings: VecDeque<(Instant, u64)>,
}

/// Remembers each GPU process's CPU ticks between cycles.
#[derive(Debug)]
pub struct CpuTracker {
    window: Duration,
    ticks_per_second: f64,
    by_pid: HashMap<u32, History>,
}

impl CpuTracker {
    pub fn new(window: Duration) -> Self {
        Self {
            window,
            ticks_per_second: clock_ticks_per_second(),
            by_pid: HashMap::new(),
        }
    }

    /// Reads the PIDs' CPU ticks now and returns the cores each used over the window. A PID
    /// is absent until its history spans most of the window: "not known yet" must not read
    /// as "quiet".
    pub fn refresh(&mut self, procfs: &Path, pids: &[u32], now: Instant) -> HashMap<u32, f64> {
        self.by_pid.retain(|pid, _| pids.contains(pid));
        let mut out = HashMap::new();
        for &pid in pids {
            let Some(CpuTicks { used, start }) = process_cpu_ticks(procfs, pid) else {
                self.by_pid.remove(&pid);
                continue;
            };
            let h = self.by_pid.entry(pid).or_insert_with(|| History {
                start,
                readings: VecDeque::new(),
            });
            if h.start != start || h.readings.back().is_some_and(|(_, u)| used < *u) {
                // A reused PID: its past is another process's.
                h.start = start;
                h.readings.clear();
            }
            h.readings.push_back((now, used));
            while h.readings.len() > MAX_READINGS
                || h.readings.front().is_some_and(|(t, _)| {
                    now.saturating_duration_since(*t) > self.window + self.window / 2
                })
            {
                h.readings.pop_front();
            }
            let Some(&(t0, u0)) = h.readings.front() else {
                continue;
            };
            let span = now.saturating_duration_since(t0);
            if span >= self.window.mul_f64(0.8) && !span.is_zero() {
                let cores = (used - u0) as f64 / self.ticks_per_second / span.as_secs_f64();
                out.insert(pid, cores);
            }
        }
        out
    }
}

#[cfg(test)]
#[path = "cpu_tests.rs"]
mod tests;

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
mod tests {
    use super::*;

    fn write_stat(root: &Path, pid: u32, used: u64, start: u64) {
        let d = root.join(pid.to_string());
        std::fs::create_dir_all(&d).unwrap();
        let line =
            format!("{pid} (python3) S 1 1 1 0 -1 0 0 0 0 0 {used} 0 0 0 20 0 4 0 {start} 0\n");
        std::fs::write(d.join("stat"), line).unwrap();
    }

    #[test]
    fn cores_over_the_window_unknown_until_it_is_spanned() {
        let dir = tempfile::tempdir().unwrap();
        let mut t = CpuTracker::new(Duration::from_secs(5));
        let hz = t.ticks_per_second;
        let t0 = Instant::now();
        for s in 0..=5u64 {
            // Half a core for pid 1, nothing for pid 2.
            write_stat(dir.path(), 1, (hz as u64 / 2) * s, 77);
            write_stat(dir.path(), 2, 3, 78);
            let got = t.refresh(dir.path(), &[1, 2, 3], t0 + Duration::from_secs(s));
            if s < 4 {
                assert!(got.is_empty(), "second {s}: {got:?}");
            } else {
                assert!((got[&1] - 0.5).abs() < 0.01, "{got:?}");
                assert_eq!(got[&2], 0.0);
                assert!(!got.contains_key(&3), "no stat file, no figure");
            }
        }
        // PID 1 reused by a new process: unknown again.
        write_stat(dir.path(), 1, 0, 999);
        let got = t.refresh(dir.path(), &[1], t0 + Duration::from_secs(6));
        assert!(!got.contains_key(&1));
    }
}

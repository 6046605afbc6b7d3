//! The demo's CUDA probe: reports for the MPS clients of GPU 5 as the probe in those processes
//! would send them (kernel busy time at the scenario's `sm_util`), filed straight into the
//! probe book, so `--demo` shows the exact mode beside the honest default of the other GPUs.
//! One of them launches like a tight loop of tiny kernels: its probe traces one eighth of the
//! time (wire v3), so `/debug/attribution` shows a sampled figure.

use std::time::{Duration, Instant};

use super::repeat::Repeating;
use super::{DemoError, ScenarioProcesses};
use tessera_exporter::source::probe::{Frame, ProbeBook};

/// The demo processes that carry the probe: GPU 5's MPS clients.
pub const PROBED_PIDS: [u32; 3] = [45061, 45062, 45063];
const REPORT_EVERY: Duration = Duration::from_millis(500);
/// Kernels per busy second, for the kernel counter (1 ms kernels).
const KERNELS_PER_BUSY_SECOND: f64 = 1000.0;
/// The client whose probe traces in duty cycles, and the share of time it traces.
const SAMPLED_PID: u32 = 45063;
const SAMPLED_TRACED_SHARE: f64 = 0.125;

/// Each pid's busy share (0..=1) in the phase running `elapsed_ms` into the scenario.
fn rates_at(s: &ScenarioProcesses, pids: &[u32], elapsed_ms: u64) -> Vec<f64> {
    let t = match s.repeat_after_ms {
        Some(r) if r > 0 => elapsed_ms % r,
        _ => elapsed_ms,
    };
    let phase = s.phases.iter().rev().find(|p| p.at_ms <= t);
    pids.iter()
        .map(|pid| {
            phase
                .and_then(|p| p.processes.iter().find(|q| q.pid == *pid))
                .map_or(0.0, |q| f64::from(q.sm_util.min(100)) / 100.0)
        })
        .collect()
}

/// Files reports for `pids` until the returned feed is dropped.
pub fn start(scenario: &str, pids: &[u32], book: ProbeBook) -> Result<Repeating, DemoError> {
    let parsed: ScenarioProcesses = serde_yaml::from_str(scenario)?;
    let pids = pids.to_vec();
    let mut busy = vec![0.0f64; pids.len()];
    let mut traced = vec![0.0f64; pids.len()];
    // One clock for the busy time and the report's timestamp: a report's busy time is then
    // exactly rate × the time between its timestamps, so a window's ratio is the scenario's
    // rate however late a loaded machine runs this thread (the compat golden reads it).
    let started = Instant::now();
    let mut last = started;
    Ok(Repeating::start(
        "tessera-demo-probe",
        REPORT_EVERY,
        move |_| {
            let now = Instant::now();
            let dt = now.duration_since(last).as_secs_f64();
            last = now;
            let elapsed = now.duration_since(started);
            let rates = rates_at(&parsed, &pids, elapsed.as_millis() as u64);
            for (((pid, b), t), rate) in pids.iter().zip(&mut busy).zip(&mut traced).zip(rates) {
                // A sampled probe sees only its traced time, and says how much that was.
                let share = if *pid == SAMPLED_PID {
                    SAMPLED_TRACED_SHARE
                } else {
                    1.0
                };
                *b += rate * dt * share;
                *t += dt * share;
                let frame = Frame {
                    busy_ns: (*b * 1e9) as u64,
                    kernels: (*b * KERNELS_PER_BUSY_SECOND) as u64,
                    traced_ns: (*pid == SAMPLED_PID).then_some((*t * 1e9) as u64),
                    ..Frame::default()
                };
                book.record(*pid, &frame, now);
            }
        },
    )?)
}

#[cfg(test)]
#[path = "probe_tests.rs"]
mod tests;

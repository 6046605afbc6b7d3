//! CPU time for the demo's and the tests' fake processes: a `stat` file per process whose
//! CPU ticks advance at the scenario's `cpu_percent`, so the "quiet process" evidence
//! (`model::compute`) sees what it would see on a real node.

use std::path::{Path, PathBuf};
use std::time::Duration;

use super::repeat::Repeating;
use super::{DemoError, ScenarioProcesses};
use tessera_exporter::source::procfs::clock_ticks_per_second;

/// How often the stat files are rewritten; finer than the tick it counts in is pointless.
const TICK: Duration = Duration::from_millis(200);

/// A process that runs kernels uses CPU to launch them; one that does not, none.
const DEFAULT_BUSY_CPU_PERCENT: f64 = 30.0;

fn write_stat(dir: &Path, pid: u32, ticks: u64) -> std::io::Result<()> {
    // Start time 1000 + pid: distinct and stable for each fake process.
    let line = format!(
        "{pid} (demo) S 1 {pid} {pid} 0 -1 4194560 0 0 0 0 {ticks} 0 0 0 20 0 1 0 {} 0\n",
        1000 + u64::from(pid)
    );
    std::fs::write(dir.join(pid.to_string()).join("stat"), line)
}

/// Writes a stat file for every process in `scenario` now and keeps them ticking.
pub fn start(scenario: &str, procfs: &Path) -> Result<Repeating, DemoError> {
    let parsed: ScenarioProcesses = serde_yaml::from_str(scenario)?;
    let mut rates: Vec<(u32, f64)> = Vec::new();
    for p in parsed.phases.iter().flat_map(|ph| &ph.processes) {
        let cpu = p.cpu_percent.unwrap_or(if p.sm_util > 0 {
            DEFAULT_BUSY_CPU_PERCENT
        } else {
            0.0
        });
        match rates.iter_mut().find(|(pid, _)| *pid == p.pid) {
            Some((_, r)) => *r = r.max(cpu),
            None => rates.push((p.pid, cpu)),
        }
    }
    for (pid, _) in &rates {
        std::fs::create_dir_all(procfs.join(pid.to_string()))?;
        write_stat(procfs, *pid, 0)?;
    }
    let root: PathBuf = procfs.to_path_buf();
    let hz = clock_ticks_per_second();
    Ok(Repeating::start(
        "tessera-demo-cpu",
        TICK,
        move |elapsed| {
            let secs = elapsed.as_secs_f64();
            for (pid, percent) in &rates {
                let ticks = (secs * percent / 100.0 * hz) as u64;
                // A test may remove a process's directory to make it vanish.
                let _ = write_stat(&root, *pid, ticks);
            }
        },
    )?)
}

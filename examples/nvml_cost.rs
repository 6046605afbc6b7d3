//! The NVML floor versus tessera's sample cycle, on a real GPU.
//!
//! Times every NVML call tessera makes per cycle, back to back from this minimal program
//! (median of N), sums them (the slow calls weighted by how often tessera makes them), then
//! times `NvmlSource::sample()` itself. Prints one markdown table.
//!
//! Run on the GPU machine: `nvml_cost [iterations] [--library PATH]`.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use nvml_wrapper::enum_wrappers::device::{Clock, EccCounter, MemoryError, TemperatureSensor};
use nvml_wrapper::enums::gpm::GpmMetricId;
use tessera_exporter::source::nvml::{open, read_process_utilization, NvmlOptions, NvmlSource};

/// tessera's defaults, in seconds: `--nvml.process-interval` and `--nvml.slow-interval`.
const PROCESS_INTERVAL_S: u64 = 5;
const SLOW_INTERVAL_S: u64 = 10;

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

/// Median and mean of `n` back-to-back calls. Driver calls have long tails, so the floor is
/// given both ways: the mean is what a once-a-second caller pays on average.
#[derive(Clone, Copy)]
struct Timing {
    median: Duration,
    mean: Duration,
}

fn time<T>(n: usize, mut f: impl FnMut() -> T) -> Timing {
    let mut samples = Vec::with_capacity(n);
    for _ in 0..n {
        let t = Instant::now();
        std::hint::black_box(f());
        samples.push(t.elapsed());
    }
    let mean = samples.iter().sum::<Duration>() / n.max(1) as u32;
    Timing {
        median: median(samples),
        mean,
    }
}

fn cpu_time() -> Duration {
    let mut usage = std::mem::MaybeUninit::<libc::rusage>::zeroed();
    // SAFETY: getrusage fills the struct it is given.
    let usage = unsafe {
        libc::getrusage(libc::RUSAGE_SELF, usage.as_mut_ptr());
        usage.assume_init()
    };
    let tv = |t: libc::timeval| Duration::new(t.tv_sec as u64, t.tv_usec as u32 * 1000);
    tv(usage.ru_utime) + tv(usage.ru_stime)
}

/// Resident memory (VmRSS, RssAnon, RssFile in KiB), to show what loading NVML itself costs.
fn rss_kib() -> [u64; 3] {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    ["VmRSS:", "RssAnon:", "RssFile:"].map(|key| {
        status
            .lines()
            .find(|l| l.starts_with(key))
            .and_then(|l| l.split_whitespace().nth(1)?.parse().ok())
            .unwrap_or(0)
    })
}

/// The same calls as the rows above, at tessera's cadence (one cycle every 100 ms here, so the
/// process-utilization and slow calls every 5th and 10th), from this minimal program: CPU per
/// cycle. Unlike the back-to-back medians, this pays what a periodic caller pays: each cycle
/// starts with cold caches on a core that was asleep.
fn spaced_floor(nvml: &'static nvml_wrapper::Nvml, cycles: u32) -> Duration {
    let devices: Vec<_> = (0..nvml.device_count().unwrap_or(0))
        .filter_map(|i| nvml.device_by_index(i).ok())
        .collect();
    let mut gpm: Vec<_> = devices.iter().map(|d| d.gpm_sample().ok()).collect();
    let mut buffer = Vec::new();
    let start = cpu_time();
    for cycle in 0..cycles {
        let _ = nvml.device_count();
        for (d, prev) in devices.iter().zip(&mut gpm) {
            let _ = (d.compute_mode(), d.memory_info(), d.utilization_rates());
            let _ = (d.power_usage(), d.enforced_power_limit());
            let _ = d.temperature(TemperatureSensor::Gpu);
            let _ = (d.clock_info(Clock::SM), d.clock_info(Clock::Memory));
            let _ = tessera_exporter::source::nvml::clock_event_reasons(nvml, d);
            let _ = d.total_ecc_errors(MemoryError::Corrected, EccCounter::Volatile);
            let _ = d.total_ecc_errors(MemoryError::Uncorrected, EccCounter::Volatile);
            let _ = d.running_compute_processes();
            let _ = d.running_graphics_processes();
            let _ = d.mps_running_compute_processes();
            if let (Some(p), Ok(cur)) = (prev.as_ref(), d.gpm_sample()) {
                let ids = [
                    GpmMetricId::SmUtil,
                    GpmMetricId::SmOccupancy,
                    GpmMetricId::AnyTensorUtil,
                    GpmMetricId::DramBwUtil,
                ];
                let _ = nvml_wrapper::gpm::gpm_metrics_get(nvml, p, &cur, &ids);
                *prev = Some(cur);
            }
            if u64::from(cycle) % PROCESS_INTERVAL_S == 0 {
                let _ = read_process_utilization(&mut buffer, d, 0);
            }
            if u64::from(cycle) % SLOW_INTERVAL_S == 0 {
                let _ = (d.total_energy_consumption(), d.pcie_replay_counter());
                let _ = d.mig_mode();
            }
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    (cpu_time() - start) / cycles.max(1)
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let mut n = 200usize;
    let mut library = None;
    while let Some(a) = args.next() {
        match a.as_str() {
            "--library" => library = args.next().map(PathBuf::from),
            other => n = other.parse()?,
        }
    }
    let nvml = open(library.as_deref())?;
    let rss_after_init = rss_kib();
    let slow_every = SLOW_INTERVAL_S as f64;
    let mut rows: Vec<(String, Timing, f64)> = Vec::new();
    let mut buffer_notes = Vec::new();
    for index in 0..nvml.device_count()? {
        let d = nvml.device_by_index(index)?;
        let mut add = |name: &str, t: Timing, weight: f64| {
            rows.push((format!("gpu{index} {name}"), t, weight))
        };
        add("device_count", time(n, || nvml.device_count()), 1.0);
        add("compute_mode", time(n, || d.compute_mode()), 1.0);
        add("memory_info", time(n, || d.memory_info()), 1.0);
        add("utilization_rates", time(n, || d.utilization_rates()), 1.0);
        add("power_usage", time(n, || d.power_usage()), 1.0);
        add(
            "enforced_power_limit",
            time(n, || d.enforced_power_limit()),
            1.0,
        );
        add(
            "temperature",
            time(n, || d.temperature(TemperatureSensor::Gpu)),
            1.0,
        );
        add("clock_info sm", time(n, || d.clock_info(Clock::SM)), 1.0);
        add(
            "clock_info memory",
            time(n, || d.clock_info(Clock::Memory)),
            1.0,
        );
        add(
            "clock event reasons",
            time(n, || {
                tessera_exporter::source::nvml::clock_event_reasons(nvml, &d)
            }),
            1.0,
        );
        add(
            "ecc corrected",
            time(n, || {
                d.total_ecc_errors(MemoryError::Corrected, EccCounter::Volatile)
            }),
            1.0,
        );
        add(
            "ecc uncorrected",
            time(n, || {
                d.total_ecc_errors(MemoryError::Uncorrected, EccCounter::Volatile)
            }),
            1.0,
        );
        add(
            "pcie_replay_counter (slow cadence)",
            time(n, || d.pcie_replay_counter()),
            1.0 / slow_every,
        );
        add(
            "compute processes",
            time(n, || d.running_compute_processes()),
            1.0,
        );
        add(
            "graphics processes",
            time(n, || d.running_graphics_processes()),
            1.0,
        );
        add(
            "mps processes",
            time(n, || d.mps_running_compute_processes()),
            1.0,
        );
        // What tessera pays: one call for the samples since the last read, every
        // PROCESS_INTERVAL. The other forms are shown for comparison (weight 0).
        let buffered = d.process_utilization_stats(0).unwrap_or_default();
        let newest = buffered.iter().map(|s| s.timestamp).max().unwrap_or(0);
        let oldest = buffered.iter().map(|s| s.timestamp).min().unwrap_or(0);
        let pids: std::collections::HashSet<u32> = buffered.iter().map(|s| s.pid).collect();
        buffer_notes.push(format!(
            "gpu{index}: {} samples of {} processes in the driver's buffer, spanning {:.1} s",
            buffered.len(),
            pids.len(),
            newest.saturating_sub(oldest) as f64 / 1e6
        ));
        let mut buffer = Vec::new();
        for window_s in [1u64, PROCESS_INTERVAL_S] {
            let since = newest.saturating_sub(window_s * 1_000_000);
            let mut returned = 0;
            let t = time(n, || {
                returned = read_process_utilization(&mut buffer, &d, since).unwrap_or(0)
            });
            buffer_notes.push(format!(
                "gpu{index}: the last {window_s} s hold {returned} samples"
            ));
            let weight = if window_s == PROCESS_INTERVAL_S {
                1.0 / PROCESS_INTERVAL_S as f64
            } else {
                0.0
            };
            add(
                &format!("process utilization, one call, last {window_s} s"),
                t,
                weight,
            );
        }
        add(
            "process utilization, nvml-wrapper (count + read), whole buffer",
            time(n, || d.process_utilization_stats(0)),
            0.0,
        );
        if d.gpm_support().unwrap_or(false) {
            let mut prev = d.gpm_sample()?;
            add(
                "gpm sample + metrics",
                time(n, || {
                    let cur = d.gpm_sample().ok()?;
                    let r = nvml_wrapper::gpm::gpm_metrics_get(
                        nvml,
                        &prev,
                        &cur,
                        &[
                            GpmMetricId::SmUtil,
                            GpmMetricId::SmOccupancy,
                            GpmMetricId::AnyTensorUtil,
                            GpmMetricId::DramBwUtil,
                        ],
                    );
                    prev = cur;
                    Some(r.is_ok())
                }),
                1.0,
            );
        }
        add(
            "total_energy (slow cadence)",
            time(n.min(50), || d.total_energy_consumption()),
            1.0 / slow_every,
        );
        add(
            "mig_mode (slow cadence)",
            time(n.min(50), || d.mig_mode()),
            1.0 / slow_every,
        );
    }
    let floor: f64 = rows
        .iter()
        .map(|(_, t, w)| t.median.as_secs_f64() * w)
        .sum();
    let floor_mean: f64 = rows.iter().map(|(_, t, w)| t.mean.as_secs_f64() * w).sum();

    let spaced = spaced_floor(nvml, n.min(100) as u32).as_secs_f64();
    let mut source = NvmlSource::new(
        nvml,
        NvmlOptions {
            library: library.clone(),
            // Cycles run every 100 ms here rather than every second, so the cadences are a
            // tenth of the defaults: the same calls per cycle.
            slow_interval: Duration::from_millis(SLOW_INTERVAL_S * 100),
            process_interval: Duration::from_millis(PROCESS_INTERVAL_S * 100),
            isolation: tessera_exporter::source::nvml::Isolation::Thread,
            gpu_timeout: Duration::from_secs(5),
            ..NvmlOptions::default()
        },
    );
    // Warm-up: discovery, capability learning, first GPM sample.
    for _ in 0..3 {
        source.sample();
    }
    let cycles = n.min(100);
    let mut walls = Vec::with_capacity(cycles);
    let cpu0 = cpu_time();
    for i in 0..cycles {
        let t = Instant::now();
        let s = source.sample();
        walls.push(t.elapsed());
        if i == 0 {
            eprintln!(
                "sample: {} GPUs, {} processes, success={}",
                s.gpus.len(),
                s.gpus.iter().map(|g| g.processes.len()).sum::<usize>(),
                s.success
            );
        }
        // tessera samples once a second; a short pause keeps the GPM window realistic.
        std::thread::sleep(Duration::from_millis(100));
    }
    let cpu_per_cycle = (cpu_time() - cpu0).as_secs_f64() / cycles as f64;
    let cycle_mean = walls.iter().sum::<Duration>().as_secs_f64() / cycles as f64;
    let cycle = median(walls).as_secs_f64();

    println!("| NVML call ({n} back to back) | median µs | mean µs | weight per cycle |\n|---|---|---|---|");
    for (name, t, w) in &rows {
        println!(
            "| {name} | {:.1} | {:.1} | {w:.2} |",
            t.median.as_secs_f64() * 1e6,
            t.mean.as_secs_f64() * 1e6
        );
    }
    println!("\n| figure | µs |\n|---|---|");
    println!(
        "| NVML floor (weighted sum of the medians above) | {:.1} |",
        floor * 1e6
    );
    println!(
        "| NVML floor (weighted sum of the means above) | {:.1} |",
        floor_mean * 1e6
    );
    println!(
        "| tessera sample cycle, wall (mean of {cycles}) | {:.1} |",
        cycle_mean * 1e6
    );
    println!(
        "| tessera sample cycle, wall (median of {cycles}) | {:.1} |",
        cycle * 1e6
    );
    println!(
        "| tessera sample cycle, CPU (mean, user+sys) | {:.1} |",
        cpu_per_cycle * 1e6
    );
    println!(
        "| cycle CPU / floor of means | {:.2}x |",
        cpu_per_cycle / floor_mean
    );
    println!(
        "| the same calls at tessera's cadence from this program, CPU per cycle | {:.1} |",
        spaced * 1e6
    );
    println!(
        "| cycle CPU / that cadenced floor | {:.2}x |",
        cpu_per_cycle / spaced
    );
    println!();
    for note in &buffer_notes {
        println!("- {note}");
    }
    println!(
        "\n| RSS of this minimal program | VmRSS KiB | anon KiB | file KiB |\n|---|---|---|---|"
    );
    let [rss, anon, file] = rss_after_init;
    println!("| after NVML init | {rss} | {anon} | {file} |");
    let [rss, anon, file] = rss_kib();
    println!("| after {cycles} tessera sample cycles | {rss} | {anon} | {file} |");
    Ok(())
}

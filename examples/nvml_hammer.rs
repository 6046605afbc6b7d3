//! Which NVML calls are unsafe when made at once for different GPUs (a bisect of the calls).
//!
//! One thread per GPU repeats a chosen group of the calls tessera makes, as fast as it can,
//! for a number of seconds, while CUDA processes come and go on the GPUs. A group that faults
//! kills this process with its signal; the caller counts which groups died. Run on a host with
//! two or more GPUs:
//!
//! `nvml_hammer GROUP SECONDS [--serialize] [--device N]`
//!
//! GROUP: `gpm` (sample + metrics), `gpm-sample` (sample alone), `processes` (running
//! processes + process utilization), `gpm+processes`, `device` (every other per-cycle call),
//! `all`. `--serialize` puts one process-wide mutex around each GPM step (the fix under
//! test); `--device N` hammers one GPU only, so that two processes can race instead of two
//! threads.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use nvml_wrapper::enum_wrappers::device::{Clock, TemperatureSensor};
use nvml_wrapper::enums::gpm::GpmMetricId;
use nvml_wrapper::gpm::gpm_metrics_get;
use nvml_wrapper::{Device, Nvml};

static GPM_LOCK: Mutex<()> = Mutex::new(());
static CALLS: AtomicU64 = AtomicU64::new(0);

#[derive(Clone, Copy)]
struct Group {
    gpm_sample: bool,
    gpm_metrics: bool,
    processes: bool,
    device: bool,
}

fn group(name: &str) -> Option<Group> {
    let none = Group {
        gpm_sample: false,
        gpm_metrics: false,
        processes: false,
        device: false,
    };
    Some(match name {
        "gpm" => Group {
            gpm_sample: true,
            gpm_metrics: true,
            ..none
        },
        "gpm-sample" => Group {
            gpm_sample: true,
            ..none
        },
        "processes" => Group {
            processes: true,
            ..none
        },
        "gpm+processes" => Group {
            gpm_sample: true,
            gpm_metrics: true,
            processes: true,
            ..none
        },
        "device" => Group {
            device: true,
            ..none
        },
        "all" => Group {
            gpm_sample: true,
            gpm_metrics: true,
            processes: true,
            device: true,
        },
        _ => return None,
    })
}

fn gated<T>(serialize: bool, f: impl FnOnce() -> T) -> T {
    if serialize {
        let _held = GPM_LOCK.lock().unwrap_or_else(|e| e.into_inner());
        f()
    } else {
        f()
    }
}

fn hammer(nvml: &Nvml, d: &Device<'_>, g: Group, serialize: bool, until: Instant) {
    let metrics = [
        GpmMetricId::SmUtil,
        GpmMetricId::SmOccupancy,
        GpmMetricId::AnyTensorUtil,
        GpmMetricId::DramBwUtil,
        GpmMetricId::NvlinkTotalTxPerSec,
    ];
    let mut previous = None;
    let mut last_seen = 0u64;
    while Instant::now() < until {
        if g.gpm_sample {
            let current = gated(serialize, || d.gpm_sample().ok());
            if let (Some(prev), Some(cur)) = (previous.take(), current.as_ref()) {
                if g.gpm_metrics {
                    let _ = gated(serialize, || gpm_metrics_get(nvml, &prev, cur, &metrics));
                }
                gated(serialize, || drop(prev));
            }
            previous = current;
        }
        if g.processes {
            let _ = d.running_compute_processes();
            let _ = d.process_utilization_stats(last_seen);
            last_seen = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|t| t.as_micros() as u64)
                .unwrap_or(0)
                .saturating_sub(1_000_000);
        }
        if g.device {
            let _ = d.memory_info();
            let _ = d.utilization_rates();
            let _ = d.power_usage();
            let _ = d.temperature(TemperatureSensor::Gpu);
            let _ = d.clock_info(Clock::SM);
            let _ = d.compute_mode();
        }
        CALLS.fetch_add(1, Ordering::Relaxed);
        std::thread::sleep(Duration::from_millis(2));
    }
    gated(serialize, || drop(previous));
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let usage = "usage: nvml_hammer GROUP SECONDS [--serialize] [--device N]";
    let Some(g) = args.get(1).and_then(|n| group(n)) else {
        eprintln!("{usage}");
        std::process::exit(2);
    };
    let Some(seconds) = args.get(2).and_then(|s| s.parse::<u64>().ok()) else {
        eprintln!("{usage}");
        std::process::exit(2);
    };
    let serialize = args.iter().any(|a| a == "--serialize");
    let only = args
        .iter()
        .position(|a| a == "--device")
        .and_then(|i| args.get(i + 1))
        .and_then(|s| s.parse::<u32>().ok());
    let nvml = match Nvml::init() {
        Ok(n) => n,
        Err(e) => {
            eprintln!("nvml_hammer: {e}");
            std::process::exit(1);
        }
    };
    let count = nvml.device_count().unwrap_or(0);
    let until = Instant::now() + Duration::from_secs(seconds);
    std::thread::scope(|s| {
        for i in 0..count {
            if only.is_some_and(|o| o != i) {
                continue;
            }
            let nvml = &nvml;
            s.spawn(move || {
                if let Ok(d) = nvml.device_by_index(i) {
                    hammer(nvml, &d, g, serialize, until);
                }
            });
        }
    });
    println!(
        "nvml_hammer {} {seconds}s serialize={serialize} device={only:?}: {} rounds, no fault",
        args[1],
        CALLS.load(Ordering::Relaxed)
    );
}

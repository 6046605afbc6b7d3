//! End to end: faults inside the NVML library itself (a SIGSEGV, an abort, a call that never
//! returns, concurrent GPM calls that crash) against the real binary and the fake NVML. The
//! exporter must keep serving; the first fault in the node's worker may cost every GPU one
//! sample, after which the GPU it is pinned on has a worker of its own and the others lose
//! none; the touched GPU must be back within two samples of each crash (docs/reliability.md).

use std::time::{Duration, Instant};

use crate::support::{value, Exporter};

fn scenario_file(dir: &tempfile::TempDir, yaml: &str) -> std::path::PathBuf {
    let path = dir.path().join("scenario.yaml");
    std::fs::write(&path, yaml).expect("scenario");
    path
}

/// Three busy GPUs with `faults` (YAML list items), sampled every 200 ms; the scenario's
/// folder lives as long as the returned guard.
fn three_gpus_with_faults(faults: &str, args: &[&str]) -> (tempfile::TempDir, Exporter) {
    let dir = tempfile::tempdir().expect("tempdir");
    let scenario = scenario_file(&dir, &format!("faults:\n{faults}{}{BUSY_THREE}", h100s(3)));
    let mut builder = Exporter::builder(&scenario).arg("--sample.interval=200ms");
    for a in args {
        builder = builder.arg(*a);
    }
    (dir, builder.start())
}

fn series_value(m: &str, family: &str, needles: &[&str]) -> Option<f64> {
    m.lines()
        .filter(|l| l.starts_with(&format!("{family}{{")))
        .find(|l| needles.iter().all(|n| l.contains(n)))
        .and_then(|l| l.rsplit_once(' '))
        .and_then(|(_, v)| v.parse().ok())
}

fn gpu_up(m: &str, gpu: &str) -> Option<f64> {
    series_value(m, "gpu_up", &[&format!("gpu=\"{gpu}\"")])
}

/// `n` H100s, as scenario YAML.
fn h100s(n: usize) -> String {
    format!("gpus:\n{}", "  - { sku: h100-80gb-hbm3 }\n".repeat(n))
}

const BUSY_THREE: &str = "phases:
  - at_ms: 0
    processes:
      - { pid: 8001, gpu: 0, comm: python3, memory_mib: 1000, sm_util: 50 }
      - { pid: 8002, gpu: 1, comm: python3, memory_mib: 2000, sm_util: 40 }
      - { pid: 8003, gpu: 2, comm: python3, memory_mib: 3000, sm_util: 30 }
";

/// What each scrape showed, for the whole run.
struct Watch {
    /// (tessera_samples_total, gpu_up by GPU index 0..3) per scrape.
    scrapes: Vec<(f64, [Option<f64>; 3])>,
    errors_seen: Vec<f64>,
    last: String,
}

fn watch(e: &Exporter, for_how_long: Duration, error_call: &str) -> Watch {
    let mut w = Watch {
        scrapes: Vec::new(),
        errors_seen: Vec::new(),
        last: String::new(),
    };
    let until = Instant::now() + for_how_long;
    while Instant::now() < until {
        let (status, body) = e.get("/metrics").expect("/metrics answers throughout");
        assert_eq!(status, 200, "/metrics answers throughout: {body}");
        let samples = value(&body, "tessera_samples_total{").unwrap_or(0.0);
        let ups = [gpu_up(&body, "0"), gpu_up(&body, "1"), gpu_up(&body, "2")];
        w.scrapes.push((samples, ups));
        if let Some(v) = series_value(
            &body,
            "tessera_nvml_errors_total",
            &[&format!("call=\"{error_call}\"")],
        ) {
            w.errors_seen.push(v);
        }
        w.last = body;
        std::thread::sleep(Duration::from_millis(30));
    }
    w
}

/// Each published sample once, with whether `gpu` was down in it.
fn by_sample(w: &Watch, gpu: usize) -> Vec<bool> {
    let mut by_sample: Vec<(u64, bool)> = w
        .scrapes
        .iter()
        .map(|(n, ups)| (*n as u64, ups[gpu] == Some(0.0)))
        .collect();
    by_sample.dedup_by_key(|(n, _)| *n);
    by_sample.into_iter().map(|(_, down)| down).collect()
}

/// The longest run of consecutive published samples in which `gpu` was down.
fn longest_down_run(w: &Watch, gpu: usize) -> usize {
    let (mut longest, mut run) = (0, 0);
    for down in by_sample(w, gpu) {
        run = if down { run + 1 } else { 0 };
        longest = longest.max(run);
    }
    longest
}

/// The log lines at ERROR level that contain `needle`.
fn error_lines<'a>(log: &'a str, needle: &str) -> Vec<&'a str> {
    log.lines()
        .filter(|l| l.contains("ERROR") && l.contains(needle))
        .collect()
}

#[test]
fn a_gpu_whose_nvml_calls_segfault_costs_the_others_one_sample_then_gets_a_worker_of_its_own() {
    // GPU 1's calls die of SIGSEGV on the 5th power reading in every process; its temperature
    // read always fails, so its failed-call counter spans several worker lives.
    let (_dir, e) = three_gpus_with_faults(
        "  - { call: nvmlDeviceGetPowerUsage, gpu: 1, crash: segv, after_calls: 5 }
  - { call: nvmlDeviceGetTemperature, gpu: 1, error: unknown }
",
        &[],
    );
    let w = watch(&e, Duration::from_secs(6), "temperature");
    let restarts = |worker: &str| {
        series_value(
            &w.last,
            "tessera_nvml_worker_restarts_total",
            &[&format!("worker=\"{worker}\""), "reason=\"sigsegv\""],
        )
        .unwrap_or(0.0)
    };
    assert_eq!(
        restarts("node"),
        1.0,
        "the node's worker died once\n{}",
        w.last
    );
    let uuid = w
        .last
        .lines()
        .find(|l| l.starts_with("gpu_up{") && l.contains("gpu=\"1\""))
        .and_then(|l| l.split("uuid=\"").nth(1))
        .and_then(|r| r.split('"').next())
        .expect("GPU 1's uuid");
    assert!(
        restarts(uuid) >= 2.0,
        "then GPU 1's own worker died, alone: {}\n{}",
        restarts(uuid),
        w.last
    );
    for untouched in [0, 2] {
        let downs = by_sample(&w, untouched).iter().filter(|d| **d).count();
        assert!(
            downs <= 1,
            "GPU {untouched} lost {downs} samples (at most the first fault's)"
        );
    }
    let down_run = longest_down_run(&w, 1);
    assert!(
        (1..=2).contains(&down_run),
        "GPU 1 down for {down_run} samples in a row (seen down at all, back within 2)"
    );
    assert!(
        w.errors_seen.windows(2).all(|p| p[1] >= p[0]),
        "a counter went backwards: {:?}",
        w.errors_seen
    );
    let last_errors = w.errors_seen.last().copied().unwrap_or(0.0);
    assert!(
        last_errors > 5.0,
        "failed calls carried across worker lives: {last_errors}"
    );
    let log = e.stop();
    assert!(
        !error_lines(&log, "died of SIGSEGV in NVML call power_usage on GPU 1").is_empty()
            && !error_lines(&log, "GPU 1 moves to a worker of its own").is_empty(),
        "the restart is logged at ERROR with the call and GPU that faulted:\n{log}"
    );
}

#[test]
fn an_abort_inside_nvml_is_counted_and_then_costs_only_its_gpu() {
    let (_dir, e) = three_gpus_with_faults(
        "  - { call: nvmlDeviceGetMemoryInfo, gpu: 2, crash: abort, after_calls: 3 }\n",
        &[],
    );
    e.wait_until("an abort counted", |e| {
        series_value(
            &e.metrics(),
            "tessera_nvml_worker_restarts_total",
            &["worker=\"node\"", "reason=\"sigabrt\""],
        )
        .is_some_and(|v| v >= 1.0)
    });
    // The abort cost GPUs 0 and 1 that sample; from the next one GPU 2 has a worker of its
    // own, which keeps aborting, alone.
    e.settle();
    let w = watch(&e, Duration::from_secs(2), "memory_info");
    assert!(w.scrapes.iter().all(|(_, ups)| ups[0] == Some(1.0)));
    assert!(w.scrapes.iter().all(|(_, ups)| ups[1] == Some(1.0)));
    assert_eq!(
        series_value(
            &w.last,
            "tessera_nvml_worker_restarts_total",
            &["worker=\"node\"", "reason=\"sigabrt\""],
        ),
        Some(1.0),
        "the node's worker died once\n{}",
        w.last
    );
    e.stop();
}

#[test]
fn a_gpu_whose_call_never_returns_moves_to_a_worker_of_its_own_and_the_others_keep_sampling() {
    let (_dir, e) = three_gpus_with_faults(
        "  - { call: nvmlDeviceGetTemperature, gpu: 1, slow_ms: 600000 }\n",
        &["--nvml.timeout=300ms"],
    );
    e.wait_until("GPU 1 reported down with its reason", |e| {
        let m = e.metrics();
        gpu_up(&m, "1") == Some(0.0)
            && series_value(&m, "gpu_down_reason", &["gpu=\"1\"", "nvml_timeout"]).is_some()
    });
    // The hang limit is 5 s at this timeout: GPU 1 stays stuck in the node's worker that long,
    // then the worker is killed to free it and GPU 1 moves out; its own worker hangs in turn
    // and is killed alone.
    let w = watch(&e, Duration::from_secs(12), "gpu_timeout");
    let restarts = |worker: &str| {
        w.last
            .lines()
            .filter(|l| l.starts_with("tessera_nvml_worker_restarts_total{"))
            .filter(|l| l.contains("reason=\"hung\"") && l.contains(worker))
            .filter_map(|l| l.rsplit_once(' ')?.1.parse::<f64>().ok())
            .sum::<f64>()
    };
    assert_eq!(restarts("worker=\"node\""), 1.0, "{}", w.last);
    assert!(restarts("worker=\"GPU-") >= 1.0, "{}", w.last);
    for other in [0, 2] {
        let downs = by_sample(&w, other).iter().filter(|d| **d).count();
        assert!(
            downs <= 1,
            "GPU {other} lost {downs} samples (at most the move's)"
        );
    }
    assert!(
        by_sample(&w, 1).iter().all(|d| *d),
        "GPU 1 is down throughout"
    );
    e.stop();
}

/// The fake crashes like the real library when two threads make GPM calls at once
/// (crates/fake-nvml/tests/crash.rs shows it does, unserialized). In thread mode tessera's GPU
/// workers are threads of one process, so only the GPM gate keeps it alive here.
#[test]
fn concurrent_gpm_on_several_gpus_does_not_crash_either_mode() {
    for isolation in ["thread", "process"] {
        let dir = tempfile::tempdir().expect("tempdir");
        let scenario = scenario_file(
            &dir,
            &format!("gpm_race_crash: {{ hold_ms: 3 }}\n{}{BUSY_THREE}", h100s(4)),
        );
        let e = Exporter::builder(&scenario)
            .arg("--sample.interval=30ms")
            .arg(format!("--nvml.isolation={isolation}"))
            .start();
        let m = e.wait_for_series("gpu_sm_activity_ratio{");
        std::thread::sleep(Duration::from_secs(3));
        let m2 = e.metrics();
        assert!(
            !m2.contains("tessera_nvml_worker_restarts_total{"),
            "{isolation}: no worker died\n{m2}"
        );
        assert!(
            value(&m2, "tessera_samples_total{") > value(&m, "tessera_samples_total{"),
            "{isolation}: still sampling"
        );
        let log = e.stop();
        assert!(!log.contains("crashing on purpose"), "{isolation}: {log}");
    }
}

/// The worker processes of exporter `pid` (its children running `__nvml-worker`, each listed
/// under the thread that started it).
fn workers_of(pid: u32) -> Vec<u32> {
    let mut children = String::new();
    for task in std::fs::read_dir(format!("/proc/{pid}/task"))
        .into_iter()
        .flatten()
    {
        let Ok(task) = task else { continue };
        let list = std::fs::read_to_string(task.path().join("children")).unwrap_or_default();
        children.push_str(&list);
        children.push(' ');
    }
    children
        .split_whitespace()
        .filter_map(|c| c.parse().ok())
        .filter(|c: &u32| {
            std::fs::read(format!("/proc/{c}/cmdline"))
                .is_ok_and(|cmd| String::from_utf8_lossy(&cmd).contains("__nvml-worker"))
        })
        .collect()
}

/// A rollout: the stop signal reaches every process of the group (Ctrl-C in a terminal,
/// systemd's control-group stop). The workers are the exporter's to stop, so nothing in the
/// log may read as a failure. Slow calls keep a request out whenever the signal lands, as
/// real GPUs' calls do: a worker that died of the signal would be seen dying mid-request.
#[test]
fn a_stop_signal_to_the_whole_process_group_logs_no_error() {
    let dir = tempfile::tempdir().expect("tempdir");
    let scenario = scenario_file(
        &dir,
        &format!(
            "faults:\n  - {{ call: nvmlDeviceGetTemperature, slow_ms: 300 }}\n{}{BUSY_THREE}",
            h100s(3)
        ),
    );
    for isolation in ["process", "thread"] {
        let e = Exporter::builder(&scenario)
            .arg(format!("--nvml.isolation={isolation}"))
            .own_process_group()
            .start();
        e.wait_until("a few samples", |e| {
            value(&e.metrics(), "tessera_samples_total{").is_some_and(|n| n >= 5.0)
        });
        // A sample was just published and the sampler rests 100 ms before the next one, whose
        // calls take 300 ms: land in those.
        std::thread::sleep(Duration::from_millis(200));
        if isolation == "process" {
            assert!(!workers_of(e.child.id()).is_empty(), "a worker runs");
        }
        let log = e.stop_group();
        let errors: Vec<&str> = log.lines().filter(|l| l.contains("ERROR")).collect();
        assert!(errors.is_empty(), "{isolation}: {errors:#?}\n{log}");
    }
}

/// A worker that dies when tessera did not stop it is a failure, whoever killed it.
#[test]
fn a_worker_killed_from_outside_is_logged_at_error() {
    let dir = tempfile::tempdir().expect("tempdir");
    let scenario = scenario_file(&dir, &format!("{}{BUSY_THREE}", h100s(3)));
    let e = Exporter::builder(&scenario).own_process_group().start();
    e.wait_for_series("gpu_up{");
    let workers = workers_of(e.child.id());
    assert_eq!(workers.len(), 1, "one worker for the node: {workers:?}");
    // SAFETY: kill(2) on a process this test's exporter started.
    unsafe {
        libc::kill(workers[0] as i32, libc::SIGTERM);
        libc::kill(workers[0] as i32, libc::SIGKILL);
    }
    e.wait_until("the restart counted", |e| {
        series_value(
            &e.metrics(),
            "tessera_nvml_worker_restarts_total",
            &["worker=\"node\"", "reason=\"sigkill\""],
        )
        .is_some()
    });
    e.wait_until("a new worker", |e| {
        workers_of(e.child.id())
            .first()
            .is_some_and(|w| *w != workers[0])
    });
    let log = e.stop_group();
    assert_eq!(
        error_lines(&log, "NVML worker exited").len(),
        1,
        "one ERROR line for the killed worker, none at the stop:\n{log}"
    );
}

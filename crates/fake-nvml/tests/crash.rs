//! Faults that end the process, as a driver library's do: `crash` faults after N calls, and
//! `gpm_race_crash`, which kills a process whose threads make GPM calls at once. Each case runs
//! in a child copy of this test binary, since the point is that the process dies.

mod common;

use std::os::unix::process::ExitStatusExt;
use std::process::Command;
use std::sync::Mutex;

const CHILD_ENV: &str = "FAKE_NVML_CRASH_CASE";

const TWO_GPUS: &str = "gpus:\n  - { sku: h100-80gb-hbm3 }\n  - { sku: h100-80gb-hbm3 }\n";

/// Runs `case` in a child process and returns how it ended.
fn in_child(case: &str) -> std::process::ExitStatus {
    let exe = std::env::current_exe().expect("test binary");
    Command::new(exe)
        .args(["--exact", "child_entry", "--nocapture", "--test-threads=1"])
        .env(CHILD_ENV, case)
        .output()
        .expect("run the child")
        .status
}

/// GPM on both GPUs from two threads, `rounds` times each; `lock` serializes them.
fn gpm_from_two_threads(nvml: &nvml_wrapper::Nvml, rounds: usize, lock: Option<&Mutex<()>>) {
    std::thread::scope(|s| {
        for index in 0..2 {
            s.spawn(move || {
                let d = nvml.device_by_index(index).expect("device");
                for _ in 0..rounds {
                    let _held = lock.map(|l| l.lock().unwrap_or_else(|e| e.into_inner()));
                    let _ = d.gpm_sample();
                }
            });
        }
    });
}

#[test]
fn child_entry() {
    let Ok(case) = std::env::var(CHILD_ENV) else {
        return;
    };
    match case.as_str() {
        "race" | "race-serialized" => {
            let path = common::write_scenario(
                &format!("{case}-{}", std::process::id()),
                &format!("gpm_race_crash: {{ hold_ms: 2 }}\n{TWO_GPUS}"),
            );
            let nvml = common::init(&path).expect("init");
            let lock = Mutex::new(());
            let lock = (case == "race-serialized").then_some(&lock);
            gpm_from_two_threads(&nvml, 200, lock);
        }
        "segv-after-3" | "abort-after-1" => {
            let (kind, after) = if case == "segv-after-3" {
                ("segv", 3)
            } else {
                ("abort", 1)
            };
            let path = common::write_scenario(
                &format!("{case}-{}", std::process::id()),
                &format!(
                    "faults:\n  - {{ call: nvmlDeviceGetPowerUsage, gpu: 1, crash: {kind}, after_calls: {after} }}\n{TWO_GPUS}"
                ),
            );
            let nvml = common::init(&path).expect("init");
            let gpu0 = nvml.device_by_index(0).expect("gpu 0");
            let gpu1 = nvml.device_by_index(1).expect("gpu 1");
            for _ in 0..10 {
                assert!(gpu0.power_usage().is_ok(), "GPU 0 is not faulted");
            }
            for call in 1..=after {
                println!("power call {call} on GPU 1");
                let _ = gpu1.power_usage();
            }
        }
        other => panic!("unknown case {other}"),
    }
    println!("child survived");
}

#[test]
fn concurrent_gpm_calls_from_two_threads_raise_sigsegv() {
    assert_eq!(in_child("race").signal(), Some(libc::SIGSEGV));
}

#[test]
fn serialized_gpm_calls_do_not_crash() {
    let status = in_child("race-serialized");
    assert!(status.success(), "{status:?}");
}

#[test]
fn a_crash_fault_fires_on_its_nth_matching_call_only() {
    assert_eq!(in_child("segv-after-3").signal(), Some(libc::SIGSEGV));
    assert_eq!(in_child("abort-after-1").signal(), Some(libc::SIGABRT));
}

//! A process named by `pid_file` (scenarios of the node tests, whose pods run real processes):
//! read through nvml-wrapper as the exporter reads it, it appears with the PID the file names
//! while that process runs, and leaves every list when it exits.

mod common;

use common::{init, write_scenario, MIB};
use nvml_wrapper::enums::device::UsedGpuMemory;
use std::process::Command;

#[test]
fn a_real_process_is_listed_while_it_runs() {
    let dir = std::env::temp_dir().join(format!("fake-nvml-pid-file-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("client.pid");
    let scenario = write_scenario(
        "pid-file",
        &format!(
            "gpus: [{{ sku: h100-80gb-hbm3 }}]\nphases:\n  - at_ms: 0\n    processes:\n      - {{ pid: 41, gpu: 0, memory_mib: 100 }}\n      - {{ pid_file: {}, gpu: 0, memory_mib: 2048, sm_util: 30 }}\n",
            file.display()
        ),
    );
    let nvml = init(&scenario).expect("init");
    let gpu = nvml.device_by_index(0).unwrap();
    let listed = || {
        gpu.running_compute_processes()
            .unwrap()
            .into_iter()
            .map(|p| match p.used_gpu_memory {
                UsedGpuMemory::Used(b) => (p.pid, b / MIB),
                UsedGpuMemory::Unavailable => (p.pid, u64::MAX),
            })
            .collect::<Vec<_>>()
    };
    assert_eq!(listed(), [(41, 100)]);

    let mut client = Command::new("sleep").arg("30").spawn().unwrap();
    std::fs::write(&file, format!("{}\n", client.id())).unwrap();
    assert_eq!(listed(), [(41, 100), (client.id(), 2048)]);
    let samples = gpu.process_utilization_stats(0).unwrap();
    assert!(
        samples
            .iter()
            .any(|s| s.pid == client.id() && s.sm_util == 30),
        "{samples:?}"
    );

    client.kill().unwrap();
    client.wait().unwrap();
    assert_eq!(listed(), [(41, 100)], "an exited process is not listed");
    std::fs::remove_dir_all(&dir).unwrap();
}

//! MPS (scenarios/mps.yaml): the lists the real H100 returned with an MPS
//! daemon and two clients (fixtures/h100/mps-two-clients.txt).

mod common;

use common::{shared, MIB};
use nvml_wrapper::enum_wrappers::device::ComputeMode;
use nvml_wrapper::enums::device::UsedGpuMemory;

#[test]
fn compute_list_has_server_and_clients_mps_list_only_clients() {
    let dev = shared("mps.yaml").device_by_index(0).unwrap();
    let compute: Vec<(u32, UsedGpuMemory)> = dev
        .running_compute_processes()
        .unwrap()
        .into_iter()
        .map(|p| (p.pid, p.used_gpu_memory))
        .collect();
    assert_eq!(
        compute,
        [
            (563, UsedGpuMemory::Used(66 * MIB)),
            (529, UsedGpuMemory::Used(808 * MIB)),
            (530, UsedGpuMemory::Used(808 * MIB)),
        ]
    );
    let mps: Vec<u32> = dev
        .mps_running_compute_processes()
        .unwrap()
        .into_iter()
        .map(|p| p.pid)
        .collect();
    assert_eq!(mps, [529, 530]);
    // A hand-started daemon leaves the compute mode alone.
    assert_eq!(dev.compute_mode().unwrap(), ComputeMode::Default);
}

/// Measured on the H100: NVML books MPS clients' kernels to the server; clients get no samples.
#[test]
fn utilization_samples_go_to_the_mps_server_only() {
    let dev = shared("mps.yaml").device_by_index(0).unwrap();
    let mut pids: Vec<u32> = dev
        .process_utilization_stats(None)
        .unwrap()
        .into_iter()
        .map(|s| s.pid)
        .collect();
    pids.sort();
    assert_eq!(pids, [563]);
}

#[test]
fn count_query_and_short_buffer() {
    let nvml = shared("mps.yaml");
    let dev = nvml.device_by_index(0).unwrap();
    let f = nvml
        .lib()
        .nvmlDeviceGetMPSComputeRunningProcesses_v3
        .as_ref()
        .unwrap();
    let mut count = 0u32;
    // Null buffer: INSUFFICIENT_SIZE with the needed count.
    assert_eq!(
        unsafe { f(dev.handle(), &mut count, std::ptr::null_mut()) },
        7
    );
    assert_eq!(count, 2);
    let mut one = vec![unsafe { std::mem::zeroed() }; 1];
    count = 1;
    assert_eq!(unsafe { f(dev.handle(), &mut count, one.as_mut_ptr()) }, 7);
    assert_eq!(count, 2);
    // A null count is an invalid argument.
    assert_eq!(
        unsafe { f(dev.handle(), std::ptr::null_mut(), one.as_mut_ptr()) },
        2
    );
}

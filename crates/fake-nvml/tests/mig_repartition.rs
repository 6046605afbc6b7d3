//! A live MIG re-partition (scenarios/mig-repartition.yaml): enumeration follows the layout of
//! the current phase, handles of destroyed instances go stale, kept instances keep their handle.

mod common;

use common::shared;
use nvml_wrapper::error::NvmlError;
use nvml_wrapper::{Device, Nvml};
use std::time::{Duration, Instant};

const OLD_3G: &str = "MIG-3a000000-0000-4000-8000-000000000001";
const OLD_2G: &str = "MIG-2b000000-0000-4000-8000-000000000002";
const NEW_1G: &str = "MIG-4d000000-0000-4000-8000-000000000004";
const NEW_3G: &str = "MIG-3f000000-0000-4000-8000-000000000006";

fn instances(nvml: &'static Nvml) -> Vec<(String, Device<'static>)> {
    let gpu = nvml.device_by_index(0).unwrap();
    (0..gpu.mig_device_count().unwrap())
        .filter_map(|i| match gpu.mig_device_by_index(i) {
            Ok(h) => Some((h.uuid().unwrap(), h)),
            Err(NvmlError::NotFound) => None,
            Err(e) => panic!("slot {i}: {e}"),
        })
        .collect()
}

fn uuids<'a>(list: &'a [(String, Device<'static>)]) -> Vec<&'a str> {
    list.iter().map(|(u, _)| u.as_str()).collect()
}

fn sleep_until(start: Instant, ms: u64) {
    let at = start + Duration::from_millis(ms);
    std::thread::sleep(at.saturating_duration_since(Instant::now()));
}

#[test]
fn the_layout_changes_under_a_running_reader() {
    let start = Instant::now();
    let nvml = shared("mig-repartition.yaml");
    let before = instances(nvml);
    assert_eq!(
        uuids(&before),
        [OLD_3G, OLD_2G, "MIG-1c000000-0000-4000-8000-000000000003"]
    );
    let old_2g = &before[1].1;
    assert_eq!(old_2g.running_compute_processes().unwrap().len(), 1);

    sleep_until(start, 1700);
    let split = instances(nvml);
    // Enumerated by GPU instance id: 3g (1), the new 1g pair (11, 12), the old 1g (13).
    assert_eq!(
        uuids(&split),
        [
            OLD_3G,
            NEW_1G,
            "MIG-5e000000-0000-4000-8000-000000000005",
            "MIG-1c000000-0000-4000-8000-000000000003"
        ]
    );
    assert!(matches!(old_2g.uuid(), Err(NvmlError::InvalidArg)));
    assert!(matches!(
        nvml.device_by_uuid(OLD_2G),
        Err(NvmlError::NotFound)
    ));
    // The untouched 3g.40gb kept its handle.
    assert_eq!(before[0].1.uuid().unwrap(), OLD_3G);
    let pids: Vec<u32> = split[1]
        .1
        .running_compute_processes()
        .unwrap()
        .iter()
        .map(|p| p.pid)
        .collect();
    assert_eq!(pids, [3103]);

    sleep_until(start, 3200);
    let recreated = instances(nvml);
    assert_eq!(recreated[0].0, NEW_3G);
    assert!(matches!(before[0].1.uuid(), Err(NvmlError::InvalidArg)));
    let slices = recreated[0]
        .1
        .attributes()
        .unwrap()
        .gpu_instance_slice_count;
    assert_eq!(slices, 3, "the same 3g.40gb shape under a new UUID");
}

//! A Grace Hopper module (scenarios/gh200.yaml): the GPU's name and memory, the power reading of
//! the GPU alone, and an energy counter whose scope is the whole module (docs/compatibility.md).

mod common;

use common::shared;
use nvml_wrapper::Nvml;
use std::time::{Duration, Instant};

fn nvml() -> &'static Nvml {
    shared("gh200.yaml")
}

#[test]
fn identity_is_the_gpu_of_a_grace_hopper_module() {
    let dev = nvml().device_by_index(0).unwrap();
    assert_eq!(dev.name().unwrap(), "NVIDIA GH200 480GB");
    assert_eq!(dev.pci_info().unwrap().pci_device_id, 0x2342_10DE);
    assert_eq!(dev.memory_info().unwrap().total, 97871 << 20);
}

#[test]
fn power_is_the_gpus_and_energy_the_modules() {
    let dev = nvml().device_by_index(0).unwrap();
    assert_eq!(dev.power_usage().unwrap(), 500_000);
    let e1 = dev.total_energy_consumption().unwrap();
    let t = Instant::now();
    std::thread::sleep(Duration::from_millis(400));
    let e2 = dev.total_energy_consumption().unwrap();
    let watts = (e2 - e1) as f64 / t.elapsed().as_secs_f64() / 1000.0;
    // 500 W of GPU and 120 W of the rest of the module: the counter's rate is the module's,
    // well above the 500 W that NVML's power reading shows.
    assert!(
        (560.0..680.0).contains(&watts),
        "energy grew at {watts:.0} W; a module counter grows at about 620 W, a GPU one at 500 W"
    );
}

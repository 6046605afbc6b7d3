//! Injected errors (scenarios/call-fails.yaml): nvmlDeviceGetPowerUsage
//! always fails on GPU 1, nothing else does.

mod common;

use nvml_wrapper::enum_wrappers::device::TemperatureSensor;
use nvml_wrapper::error::NvmlError;

#[test]
fn power_fails_on_gpu1_only() {
    let nvml = common::shared("call-fails.yaml");
    let (gpu0, gpu1) = (
        nvml.device_by_index(0).unwrap(),
        nvml.device_by_index(1).unwrap(),
    );
    assert!(matches!(gpu1.power_usage(), Err(NvmlError::Unknown)));
    assert!(gpu0.power_usage().unwrap() > 74_000);
    assert!(gpu1.temperature(TemperatureSensor::Gpu).is_ok());
    assert_eq!(gpu1.running_compute_processes().unwrap().len(), 1);
    assert!(gpu1.total_energy_consumption().is_ok());
}

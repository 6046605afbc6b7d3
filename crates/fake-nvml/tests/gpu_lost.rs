//! GPU 1 falls off the bus at 300 ms (scenarios/gpu-lost.yaml). One test,
//! because it follows the scenario clock from init.

mod common;

use nvml_wrapper::bitmasks::event::EventTypes;
use nvml_wrapper::enums::event::XidError;
use nvml_wrapper::error::NvmlError;
use std::time::{Duration, Instant};

#[test]
fn lost_gpu_and_its_xid() {
    let started = Instant::now();
    let nvml = common::init(&common::scenario("gpu-lost.yaml")).unwrap();
    let gpu0 = nvml.device_by_index(0).unwrap();
    let gpu1 = nvml.device_by_index(1).unwrap();
    assert!(gpu1
        .supported_event_types()
        .unwrap()
        .contains(EventTypes::CRITICAL_XID_ERROR));
    let set = nvml.create_event_set().unwrap();
    let set = gpu0
        .register_events(EventTypes::CRITICAL_XID_ERROR, set)
        .unwrap();
    let set = gpu1
        .register_events(EventTypes::CRITICAL_XID_ERROR, set)
        .unwrap();

    // Healthy before 300 ms, and no event yet: checkable only while that phase lasts, which
    // a machine loaded enough to take 200 ms over the calls above has already spent.
    let before_the_fault = started.elapsed();
    if before_the_fault < Duration::from_millis(200) {
        assert!(gpu1.power_usage().is_ok());
        assert!(matches!(set.wait(50), Err(NvmlError::Timeout)));
    } else {
        common::report_skipped(
            "lost_gpu_and_its_xid",
            &format!(
                "the healthy phase was not checked: setting up took {} ms of its 300",
                before_the_fault.as_millis()
            ),
        );
    }

    // The XID arrives while we wait, once the phase starts.
    let event = set.wait(2000).unwrap();
    assert!(started.elapsed() >= Duration::from_millis(300));
    assert!(event.event_type.contains(EventTypes::CRITICAL_XID_ERROR));
    assert_eq!(event.event_data, Some(XidError::Value(79)));
    assert_eq!(unsafe { event.device.handle() }, unsafe { gpu1.handle() });
    // Each XID is delivered once.
    assert!(matches!(set.wait(100), Err(NvmlError::Timeout)));

    // From now on every call on GPU 1 fails; GPU 0 is unaffected.
    assert!(matches!(gpu1.power_usage(), Err(NvmlError::GpuLost)));
    assert!(matches!(gpu1.uuid(), Err(NvmlError::GpuLost)));
    assert!(matches!(
        gpu1.running_compute_processes(),
        Err(NvmlError::GpuLost)
    ));
    assert!(matches!(nvml.device_by_index(1), Err(NvmlError::GpuLost)));
    assert_eq!(nvml.device_count().unwrap(), 2);
    assert_eq!(gpu0.running_compute_processes().unwrap().len(), 1);
    assert!(gpu0.power_usage().is_ok());

    set.release_events().unwrap();
    nvml.shutdown().unwrap();
}

//! What the sources saw, beyond the NVML samples: how a device may be shared (`sharing`), the
//! fractional schedulers' grants (`fractional`), device IDs (`device_id`), a process's cgroup
//! (`identity`) and the kubelet's allocations (`allocations`). Plain data and parsers that
//! import nothing from the wings above.

pub mod allocations;
pub mod device_id;
pub mod fractional;
pub mod identity;
pub mod sharing;

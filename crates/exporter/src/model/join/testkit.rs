//! Fixtures for unit tests of the model and of what reads its snapshots: the join's inputs with
//! nothing known but NVML, and the process most tests put on a GPU. A test names only what its
//! case is about: `join(JoinInputs { allocations: Some(&a), ..testkit::inputs(&nvml) })`.

use std::collections::HashMap;
use std::sync::{Arc, LazyLock};

use super::{join, JoinInputs};
use crate::model::compute::ActivityInputs;
use crate::model::device_id::ResourceMatcher;
use crate::model::holding::PodRef;
use crate::model::identity::CgroupIdentity;
use crate::model::view::{ContainerUse, Snapshot};
use crate::model::{NvmlSample, ProcessKind, ProcessSample, SharingMode};

static NO_CGROUPS: LazyLock<HashMap<u32, CgroupIdentity>> = LazyLock::new(HashMap::new);
static NO_EXTRA_RESOURCES: LazyLock<ResourceMatcher> = LazyLock::new(ResourceMatcher::default);
static NO_ACTIVITY: LazyLock<ActivityInputs> = LazyLock::new(ActivityInputs::default);

/// The join's inputs for `nvml` on node `n` at t = 1 s, with no kubelet, no API server, no
/// cgroups, no CPU or probe readings and no previous sample.
pub fn inputs(nvml: &NvmlSample) -> JoinInputs<'_> {
    JoinInputs {
        node: "n",
        timestamp_seconds: 1.0,
        nvml,
        collectors: vec![],
        sample_duration_seconds: 0.0,
        allocations: None,
        cluster: None,
        cgroups: &NO_CGROUPS,
        resources: &NO_EXTRA_RESOURCES,
        activity: &NO_ACTIVITY,
        previous: None,
        energy_floor_window: 30.0,
    }
}

/// The snapshot of [`inputs`].
pub fn snapshot(nvml: &NvmlSample) -> Snapshot {
    join(inputs(nvml))
}

/// A `python3` compute process holding 1 GiB, NVML's SM reading for it `sm`.
pub fn compute_process(pid: u32, sm: Option<f64>) -> ProcessSample {
    ProcessSample {
        pid,
        name: "python3".into(),
        kind: Some(ProcessKind::Compute),
        memory_used_bytes: Some(1 << 30),
        sm_utilization: sm,
        ..Default::default()
    }
}

/// `pod`'s row on a time-sliced device, one process of its on it and nothing measured.
pub fn container_use(pod: PodRef) -> ContainerUse {
    ContainerUse {
        processes: 1,
        ..ContainerUse::blank(Arc::new(pod), None, SharingMode::TimeSlicing)
    }
}

//! Unit tests of the join where the kubelet and NVML disagree.

use super::*;
use crate::model::allocations::{Allocations, ContainerAllocation, ResourceDevices};
use crate::model::compute::SplitMethod;
use crate::model::testkit;
use crate::model::{GpuSample, MigSample, NvmlSample};

fn allocation(pod: &str, mig_uuid: &str) -> ContainerAllocation {
    ContainerAllocation {
        namespace: "ml".into(),
        pod: pod.into(),
        container: "main".into(),
        devices: vec![ResourceDevices {
            resource_name: "nvidia.com/mig-1g.10gb".into(),
            device_ids: vec![mig_uuid.into()],
        }],
        dynamic: vec![],
    }
}

#[test]
fn a_pod_holding_a_destroyed_mig_instance_leaves_no_series_and_is_counted() {
    // The kubelet still lists a pod on an instance that a live re-partition destroyed.
    let nvml = NvmlSample {
        gpus: vec![GpuSample {
            uuid: "GPU-f86ae500-eefe-ae79-dc8d-234ca550730a".into(),
            up: true,
            mig_enabled: Some(true),
            mig_instances: vec![MigSample {
                uuid: "MIG-3a000000-0000-4000-8000-000000000001".into(),
                profile: "1g.10gb".into(),
                slices: 1,
                ..Default::default()
            }],
            ..Default::default()
        }],
        ..Default::default()
    };
    let allocations = Allocations {
        containers: vec![
            allocation("kept", "MIG-3a000000-0000-4000-8000-000000000001"),
            allocation("orphan", "MIG-2b000000-0000-4000-8000-000000000002"),
        ],
        ..Default::default()
    };
    let s = join(JoinInputs {
        allocations: Some(&allocations),
        ..testkit::inputs(&nvml)
    });
    let pods: Vec<&str> = s.gpus[0]
        .containers
        .iter()
        .map(|c| c.pod.pod.as_str())
        .collect();
    assert_eq!(pods, ["kept"]);
    assert_eq!(
        s.gpus[0].containers[0].mig_uuid.as_deref(),
        Some("MIG-3a000000-0000-4000-8000-000000000001")
    );
    assert_eq!(s.attribution.unresolved_device_ids, 1);
}

#[test]
fn a_gpus_run_of_idle_readings_is_carried_from_sample_to_sample() {
    // A process alone, its CPU busy; the device reads 0 from t = 11 s (NVML's ~167 ms
    // snapshot between two long kernels, or the process stopped launching): idle only once
    // the readings span the window.
    let sample = |utilization: f64| NvmlSample {
        gpus: vec![GpuSample {
            uuid: "GPU-f86ae500-eefe-ae79-dc8d-234ca550730a".into(),
            up: true,
            utilization: Some(utilization),
            processes: vec![testkit::compute_process(7, Some(0.0))],
            ..Default::default()
        }],
        ..Default::default()
    };
    let activity = ActivityInputs {
        cpu_cores: [(7, 0.3)].into_iter().collect(),
        window_seconds: 5.0,
        timeline_lag_seconds: 0.0,
        ..Default::default()
    };
    let mut previous: Option<Snapshot> = None;
    let mut methods = Vec::new();
    for (t, u) in [
        (10.0, 0.4),
        (11.0, 0.0),
        (12.0, 0.0),
        (13.0, 0.0),
        (14.0, 0.0),
        (15.0, 0.0),
    ] {
        let nvml = sample(u);
        let s = join(JoinInputs {
            timestamp_seconds: t,
            activity: &activity,
            previous: previous.as_ref(),
            ..testkit::inputs(&nvml)
        });
        methods.push(s.gpus[0].compute.method);
        previous = Some(s);
    }
    use SplitMethod::{Idle, SoleActiveProcess as Sole};
    assert_eq!(methods, [Sole, Sole, Sole, Sole, Sole, Idle]);
    assert_eq!(
        previous.map(|s| s.gpus[0].compute.idle_since),
        Some(Some(11.0))
    );
}

#[test]
fn an_init_container_on_its_pods_device_is_not_bypass_but_a_sibling_is() {
    use crate::model::cluster::{ClusterView, ContainerMeta, PodMeta};
    use crate::model::identity::{CgroupIdentity, ContainerRuntime};
    const GPU: &str = "GPU-f86ae500-eefe-ae79-dc8d-234ca550730a";
    let nvml = NvmlSample {
        gpus: vec![GpuSample {
            uuid: GPU.into(),
            up: true,
            processes: vec![
                testkit::compute_process(7, Some(0.3)),
                testkit::compute_process(8, None),
            ],
            ..Default::default()
        }],
        ..Default::default()
    };
    // pod-resources lists the app container only: the kubelet lent its GPU to `warmup`.
    let allocations = Allocations {
        containers: vec![ContainerAllocation {
            namespace: "ml".into(),
            pod: "prep".into(),
            container: "main".into(),
            devices: vec![ResourceDevices {
                resource_name: "nvidia.com/gpu".into(),
                device_ids: vec![GPU.into()],
            }],
            dynamic: vec![],
        }],
        ..Default::default()
    };
    let container = |name: &str| ContainerMeta {
        name: name.into(),
        container_id: Some(format!("{:0>64}", name.len())),
    };
    let cluster = ClusterView::new(
        vec![PodMeta {
            uid: "0a1b2c3d-0000-4000-8000-000000000001".into(),
            namespace: "ml".into(),
            name: "prep".into(),
            containers: vec![
                container("warmup"),
                container("main"),
                container("sidecar-x"),
            ],
            init_containers: vec!["warmup".into()],
            ..Default::default()
        }],
        Default::default(),
        vec![],
    );
    let in_container = |name: &str| CgroupIdentity {
        pod_uid: Some("0a1b2c3d-0000-4000-8000-000000000001".into()),
        container_id: container(name).container_id,
        runtime: ContainerRuntime::Containerd,
        qos: None,
    };
    let cgroups = [(7, in_container("warmup")), (8, in_container("sidecar-x"))]
        .into_iter()
        .collect();
    let s = join(JoinInputs {
        allocations: Some(&allocations),
        cluster: Some(&cluster),
        cgroups: &cgroups,
        ..testkit::inputs(&nvml)
    });
    let flagged: Vec<(&str, bool)> = s.gpus[0]
        .containers
        .iter()
        .map(|c| (c.pod.container.as_str(), c.unallocated_use))
        .collect();
    assert_eq!(
        flagged,
        [("main", false), ("sidecar-x", true), ("warmup", false)]
    );
}

#[test]
fn a_holder_whose_init_container_runs_on_its_device_is_not_idle() {
    use crate::model::cluster::{ClusterView, ContainerMeta, PodMeta};
    use crate::model::compute::Activity;
    use crate::model::identity::{CgroupIdentity, ContainerRuntime};
    const GPU: &str = "GPU-f86ae500-eefe-ae79-dc8d-234ca550730a";
    // The app container `main` holds the GPU and has not started; its init container
    // `warmup` runs a kernel-launching process on it (as a real kubelet does).
    let nvml = NvmlSample {
        gpus: vec![GpuSample {
            uuid: GPU.into(),
            up: true,
            utilization: Some(0.4),
            processes: vec![testkit::compute_process(7, Some(0.4))],
            ..Default::default()
        }],
        ..Default::default()
    };
    let allocations = Allocations {
        containers: vec![ContainerAllocation {
            namespace: "ml".into(),
            pod: "prep".into(),
            container: "main".into(),
            devices: vec![ResourceDevices {
                resource_name: "nvidia.com/gpu".into(),
                device_ids: vec![GPU.into()],
            }],
            dynamic: vec![],
        }],
        ..Default::default()
    };
    let container = |name: &str| ContainerMeta {
        name: name.into(),
        container_id: Some(format!("{:0>64}", name.len())),
    };
    let cluster = ClusterView::new(
        vec![PodMeta {
            uid: "0a1b2c3d-0000-4000-8000-000000000001".into(),
            namespace: "ml".into(),
            name: "prep".into(),
            containers: vec![container("warmup"), container("main")],
            init_containers: vec!["warmup".into()],
            ..Default::default()
        }],
        Default::default(),
        vec![],
    );
    let cgroups = [(
        7,
        CgroupIdentity {
            pod_uid: Some("0a1b2c3d-0000-4000-8000-000000000001".into()),
            container_id: container("warmup").container_id,
            runtime: ContainerRuntime::Containerd,
            qos: None,
        },
    )]
    .into_iter()
    .collect();
    let s = join(JoinInputs {
        allocations: Some(&allocations),
        cluster: Some(&cluster),
        cgroups: &cgroups,
        ..testkit::inputs(&nvml)
    });
    let main = s.gpus[0]
        .containers
        .iter()
        .find(|c| c.pod.container == "main")
        .expect("the holder's row");
    assert_eq!(main.activity, Activity::Unknown);
    assert_eq!(main.idle_seconds, 0.0);
}

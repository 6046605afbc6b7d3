//! Limits and fractional holdings through the whole join.

use std::collections::BTreeMap;

use crate::model::allocations::{
    AllocatableDevice, Allocations, ContainerAllocation, ResourceDevices,
};
use crate::model::cluster::{ClusterView, PodMeta, SharingStrategy};
use crate::model::fractional::{self, PodParts, PodSharing};
use crate::model::join::{join, JoinInputs};
use crate::model::testkit;
use crate::model::view::Snapshot;
use crate::model::{GpuSample, MemoryBytes, NvmlSample, SharingMode};

const G0: &str = "GPU-0fc3eda5-e98b-a25b-5b0d-cf5c855d1448";
const G1: &str = "GPU-00552014-5c87-89ac-b1a6-7b53aa24b0ec";
const GIB: u64 = 1 << 30;
const MIB: u64 = 1 << 20;

fn gpu(i: u32, uuid: &str) -> GpuSample {
    GpuSample {
        index: i,
        uuid: uuid.into(),
        up: true,
        memory: Some(MemoryBytes {
            total: 80 * GIB,
            used: 0,
            reserved: 0,
        }),
        ..Default::default()
    }
}

fn alloc(ns: &str, pod: &str, resource: &str, ids: &[&str]) -> ContainerAllocation {
    ContainerAllocation {
        namespace: ns.into(),
        pod: pod.into(),
        container: "main".into(),
        devices: vec![ResourceDevices {
            resource_name: resource.into(),
            device_ids: ids.iter().map(|s| s.to_string()).collect(),
        }],
        dynamic: vec![],
    }
}

fn meta(
    ns: &str,
    name: &str,
    ann: &[(&str, &str)],
    labels: &[(&str, &str)],
    env: Vec<(&str, &str)>,
) -> PodMeta {
    let ann: BTreeMap<String, String> = ann
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    let labels: BTreeMap<String, String> = labels
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    PodMeta {
        uid: format!("uid-{name}"),
        namespace: ns.into(),
        name: name.into(),
        sharing: PodSharing::from_parts(&PodParts {
            namespace: ns,
            annotations: Some(&ann),
            labels: Some(&labels),
            containers: vec!["main"],
            env: vec![("main", env)],
            ..Default::default()
        }),
        ..Default::default()
    }
}

fn run(gpus: Vec<GpuSample>, alloc: &Allocations, cluster: &ClusterView) -> Snapshot {
    let nvml = NvmlSample {
        gpus,
        ..Default::default()
    };
    join(JoinInputs {
        allocations: Some(alloc),
        cluster: Some(cluster),
        ..testkit::inputs(&nvml)
    })
}

fn row<'a>(s: &'a Snapshot, pod: &str) -> (u32, &'a crate::model::view::ContainerUse) {
    s.gpus
        .iter()
        .find_map(|g| {
            g.containers
                .iter()
                .find(|c| c.pod.pod == pod)
                .map(|c| (g.index, c))
        })
        .unwrap_or_else(|| panic!("no row for {pod}"))
}

#[test]
fn hami_annotation_beats_the_placeholder_ids() {
    // The kubelet handed out a placeholder of GPU 0; HAMi's annotation says GPU 1.
    let alloc = Allocations {
        containers: vec![
            alloc("ml", "a", "nvidia.com/gpu", &[&format!("{G0}-3")]),
            alloc("ml", "b", "nvidia.com/gpu", &[&format!("{G1}-0")]),
            alloc("ml", "plain", "nvidia.com/gpu", &[&format!("{G0}-1")]),
        ],
        allocatable: (0..4)
            .flat_map(|n| {
                [G0, G1].map(|g| AllocatableDevice {
                    resource_name: "nvidia.com/gpu".into(),
                    device_id: format!("{g}-{n}"),
                })
            })
            .collect(),
        skipped: 0,
    };
    let hami = |mem: u32, cores: u32| format!("{G1},NVIDIA,{mem},{cores}:;");
    let cluster = ClusterView::new(
        vec![
            meta(
                "ml",
                "a",
                &[(fractional::HAMI_ALLOCATED, &hami(20000, 30))],
                &[],
                vec![],
            ),
            meta(
                "ml",
                "b",
                &[(fractional::HAMI_ALLOCATED, &hami(10000, 0))],
                &[],
                vec![],
            ),
        ],
        BTreeMap::new(),
        vec![],
    );
    let s = run(vec![gpu(0, G0), gpu(1, G1)], &alloc, &cluster);
    let (g, a) = row(&s, "a");
    assert_eq!(g, 1);
    assert_eq!(a.sharing_mode, SharingMode::Fractional);
    assert_eq!(a.limits.memory_bytes, Some(20000 * MIB));
    assert_eq!(a.limits.compute_ratio, Some(0.30));
    assert_eq!(a.limits.source, Some("hami"));
    assert_eq!(a.allocations[0].device_id, format!("{G0}-3"));
    let (_, b) = row(&s, "b");
    assert_eq!(b.limits.compute_ratio, None, "0 cores is unlimited");
    assert_eq!(s.gpus[1].sharers, 2);
    assert_eq!(s.gpus[1].replicas, 4, "HAMi's split count");
    assert_eq!(s.gpus[1].evidence.fractional, Some("hami"));
    // Without an annotation the placeholder still names its GPU.
    let (g, plain) = row(&s, "plain");
    assert_eq!((g, plain.limits.source), (0, None));
    assert_eq!(s.gpus[0].sharing_mode, SharingMode::TimeSlicing);
    assert_eq!(s.attribution.unresolved_device_ids, 0);
}

#[test]
fn kai_fractions_take_over_the_reservation() {
    let alloc = Allocations {
        containers: vec![
            alloc(
                "kai-resource-reservation",
                "gpu-reservation-n-abcde",
                "nvidia.com/gpu",
                &[G1],
            ),
            alloc(
                "kai-resource-reservation",
                "gpu-reservation-n-zzzzz",
                "nvidia.com/gpu",
                &[G0],
            ),
        ],
        ..Default::default()
    };
    let group = [(fractional::KAI_GROUP_LABEL, "g1")];
    let cluster = ClusterView::new(
        vec![
            meta(
                "kai-resource-reservation",
                "gpu-reservation-n-abcde",
                &[],
                &group,
                vec![],
            ),
            meta(
                "kai-resource-reservation",
                "gpu-reservation-n-zzzzz",
                &[(fractional::KAI_RESERVED_GPU, G0)],
                &[(fractional::KAI_GROUP_LABEL, "idle")],
                vec![],
            ),
            meta(
                "team",
                "half",
                &[(fractional::KAI_FRACTION, "0.5")],
                &group,
                vec![],
            ),
            meta(
                "team",
                "mem",
                &[(fractional::KAI_MEMORY, "2000")],
                &group,
                vec![],
            ),
        ],
        BTreeMap::new(),
        vec![],
    );
    let s = run(vec![gpu(0, G0), gpu(1, G1)], &alloc, &cluster);
    let (g, half) = row(&s, "half");
    assert_eq!(g, 1);
    assert_eq!(half.sharing_mode, SharingMode::Fractional);
    assert_eq!(half.limits.memory_bytes, Some(40 * GIB));
    assert_eq!(half.limits.compute_ratio, None);
    assert_eq!(half.allocations[0].device_id, G1);
    assert_eq!(row(&s, "mem").1.limits.memory_bytes, Some(2000 * MIB));
    assert!(
        !s.gpus[1]
            .containers
            .iter()
            .any(|c| c.pod.pod.starts_with("gpu-reservation")),
        "the placeholder is not a tenant"
    );
    assert_eq!(s.gpus[1].sharers, 2);
    // A reservation nobody uses still holds its GPU.
    assert_eq!(row(&s, "gpu-reservation-n-zzzzz").0, 0);
    assert_eq!(s.gpus[0].sharing_mode, SharingMode::Exclusive);
}

#[test]
fn mps_limits_split_evenly_or_from_env() {
    let alloc = Allocations {
        containers: vec![
            alloc("s", "a", "nvidia.com/gpu.shared", &[&format!("{G0}::0")]),
            alloc("s", "b", "nvidia.com/gpu.shared", &[&format!("{G0}::1")]),
            alloc("s", "ts", "nvidia.com/gpu", &[G1]),
        ],
        allocatable: (0..4)
            .map(|n| AllocatableDevice {
                resource_name: "nvidia.com/gpu.shared".into(),
                device_id: format!("{G0}::{n}"),
            })
            .collect(),
        skipped: 0,
    };
    let mut labels = BTreeMap::new();
    labels.insert(
        crate::model::cluster::SHARING_STRATEGY_LABEL.to_string(),
        SharingStrategy::Mps.as_str().to_string(),
    );
    let cluster = ClusterView::new(
        vec![
            meta("s", "a", &[], &[], vec![]),
            meta(
                "s",
                "b",
                &[],
                &[],
                vec![
                    (fractional::MPS_THREADS_ENV, "10"),
                    (fractional::MPS_MEMORY_ENV, "0=4G"),
                ],
            ),
            meta(
                "s",
                "ts",
                &[],
                &[],
                vec![(fractional::MPS_THREADS_ENV, "10")],
            ),
        ],
        labels,
        vec![],
    );
    let s = run(vec![gpu(0, G0), gpu(1, G1)], &alloc, &cluster);
    let (_, a) = row(&s, "a");
    assert_eq!(a.sharing_mode, SharingMode::Mps);
    assert_eq!(a.limits.memory_bytes, Some(20 * GIB));
    assert_eq!(a.limits.compute_ratio, Some(0.25));
    assert_eq!(a.limits.source, Some("mps-device-plugin"));
    let (_, b) = row(&s, "b");
    assert_eq!(b.limits.memory_bytes, Some(4 * GIB));
    assert_eq!(b.limits.compute_ratio, Some(0.10));
    assert_eq!(b.limits.source, Some("mps-env"));
    // The node declares MPS, so GPU 1 is MPS too: one replica, the whole device.
    let (_, ts) = row(&s, "ts");
    assert_eq!(ts.limits.compute_ratio, Some(0.10));
    assert_eq!(ts.limits.memory_bytes, Some(80 * GIB));
}

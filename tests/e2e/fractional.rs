//! Fractional schedulers and MPS limits end to end: the real binary, the fake NVML library, a
//! fake kubelet reporting the device IDs these schedulers really produce (HAMi's
//! `GPU-<uuid>-<n>` placeholders, KAI's reservation pod holding a whole GPU), and a fake API
//! server serving pods with their real annotations and env.

use std::collections::BTreeMap;

use crate::support::Exporter;
use k8s_openapi::api::core::v1::{EnvVar, Pod};
use tessera_demo::cluster::{self, PodPlan};
use tessera_demo::fakes::apiserver::{FakeApiServer, FakeCluster};
use tessera_demo::fakes::kubelet::FakeKubelet;

const NODE: &str = "test-node";
const GPU: [&str; 3] = [
    "GPU-10000000-0000-0000-0000-000000000000",
    "GPU-11111111-0000-0000-0000-000000000000",
    "GPU-22222222-0000-0000-0000-000000000000",
];
const MIB: f64 = 1024.0 * 1024.0;

fn plan(ns: &str, name: &str, resource: &str, ids: &[String], pids: &[u32]) -> PodPlan {
    PodPlan::single(ns, name, resource, ids, pids)
}

fn plans() -> Vec<PodPlan> {
    vec![
        // HAMi: the kubelet hands out placeholders of GPU 1; the annotation says GPU 0.
        plan(
            "ml",
            "hami-a",
            "nvidia.com/gpu",
            &[format!("{}-0", GPU[1])],
            &[7001],
        ),
        plan(
            "ml",
            "vc-b",
            "volcano.sh/vgpu-number",
            &["x-1".into()],
            &[7009],
        ),
        // KAI: the reservation pod holds GPU 1; two fraction pods hold nothing themselves.
        plan(
            "kai-resource-reservation",
            "gpu-reservation-test-node-abcde",
            "nvidia.com/gpu",
            &[GPU[1].into()],
            &[],
        ),
        plan("team-a", "frac-a", "", &[], &[7101]),
        plan("team-b", "frac-b", "", &[], &[7102]),
        // MPS through the device plugin; one client lowers its own limits.
        plan("gpu-operator", "mps-daemon", "", &[], &[7200]),
        plan(
            "serving",
            "mps-a",
            "nvidia.com/gpu.shared",
            &[format!("{}::0", GPU[2])],
            &[7201, 7202],
        ),
        plan(
            "serving",
            "mps-b",
            "nvidia.com/gpu.shared",
            &[format!("{}::1", GPU[2])],
            &[7203],
        ),
    ]
}

fn annotate(pod: &mut Pod, pairs: &[(&str, String)]) {
    let ann = pod.metadata.annotations.get_or_insert_with(BTreeMap::new);
    for (k, v) in pairs {
        ann.insert((*k).to_owned(), v.clone());
    }
}

fn api_pods(plans: &[PodPlan]) -> Vec<Pod> {
    let mut pods: Vec<Pod> = plans.iter().map(|p| p.to_pod(NODE)).collect();
    for pod in &mut pods {
        let name = pod.metadata.name.clone().unwrap_or_default();
        let group = |pod: &mut Pod| {
            pod.metadata
                .labels
                .get_or_insert_with(BTreeMap::new)
                .insert("runai-gpu-group".into(), "grp-7".into());
        };
        match name.as_str() {
            "hami-a" => annotate(
                pod,
                &[
                    (
                        "hami.io/vgpu-devices-allocated",
                        format!("{},NVIDIA,20000,30:;", GPU[0]),
                    ),
                    ("hami.io/vgpu-node", NODE.into()),
                    ("hami.io/bind-phase", "success".into()),
                ],
            ),
            "vc-b" => annotate(
                pod,
                &[(
                    "volcano.sh/vgpu-ids-new",
                    format!("{},NVIDIA,30000,50:", GPU[0]),
                )],
            ),
            "gpu-reservation-test-node-abcde" => {
                group(pod);
                annotate(pod, &[("run.ai/reserve_for_gpu_index", GPU[1].into())]);
            }
            "frac-a" => {
                group(pod);
                annotate(pod, &[("gpu-fraction", "0.5".into())]);
            }
            "frac-b" => {
                group(pod);
                annotate(pod, &[("gpu-memory", "8000".into())]);
            }
            "mps-b" => {
                if let Some(c) = pod.spec.as_mut().and_then(|s| s.containers.first_mut()) {
                    c.env = Some(vec![
                        EnvVar {
                            name: "CUDA_MPS_ACTIVE_THREAD_PERCENTAGE".into(),
                            value: Some("20".into()),
                            ..Default::default()
                        },
                        EnvVar {
                            name: "CUDA_MPS_PINNED_DEVICE_MEM_LIMIT".into(),
                            value: Some("0=1500M".into()),
                            ..Default::default()
                        },
                    ]);
                }
            }
            _ => {}
        }
    }
    pods
}

fn line<'a>(m: &'a str, family: &str, pod: &str) -> Option<&'a str> {
    m.lines()
        .find(|l| l.starts_with(family) && l.contains(&format!("pod=\"{pod}\"")))
}

fn val(m: &str, family: &str, pod: &str) -> Option<f64> {
    line(m, family, pod)?.rsplit_once(' ')?.1.parse().ok()
}

fn gpu_mode(m: &str, gpu: &str) -> Option<String> {
    m.lines()
        .find(|l| l.starts_with("gpu_info{") && l.contains(&format!("gpu=\"{gpu}\"")))
        .and_then(|l| l.split("sharing_mode=\"").nth(1)?.split('"').next())
        .map(str::to_owned)
}

#[test]
fn fractional_schedulers_and_mps_limits() {
    let rt = crate::support::fake_cluster_runtime();
    let dir = tempfile::tempdir().unwrap();
    let plans = plans();
    let api = rt
        .block_on(FakeApiServer::start(FakeCluster {
            pods: api_pods(&plans),
            nodes: vec![cluster::node(NODE, BTreeMap::new())],
            ..Default::default()
        }))
        .unwrap();
    let socket = dir.path().join("kubelet.sock");
    let mut allocatable: Vec<(String, String)> = (0..4)
        .flat_map(|n| {
            GPU[..2]
                .iter()
                .map(move |g| ("nvidia.com/gpu".into(), format!("{g}-{n}")))
        })
        .collect();
    allocatable
        .extend((0..2).map(|n| ("nvidia.com/gpu.shared".into(), format!("{}::{n}", GPU[2]))));
    let _kubelet = rt
        .block_on(FakeKubelet::start(
            &socket,
            cluster::kubelet_state(&plans, allocatable),
        ))
        .unwrap();
    let e = Exporter::builder(crate::support::workspace().join("tests/scenarios/cluster.yaml"))
        .in_fake_cluster(dir.path(), &api.url(), plans.clone(), &socket)
        .arg("--web.enable-debug=true")
        .start();
    e.wait_until("fractional limits", |e| {
        let m = e.metrics();
        ["hami-a", "vc-b", "frac-a", "frac-b", "mps-b"]
            .iter()
            .all(|p| line(&m, "gpu_container_memory_limit_bytes{", p).is_some())
    });
    let m = e.settle();

    // HAMi and Volcano: the annotation's GPU, not the placeholder's; their grants as limits.
    assert_eq!(gpu_mode(&m, "0").as_deref(), Some("fractional"), "{m}");
    assert!(line(&m, "gpu_container_memory_limit_bytes{", "hami-a")
        .is_some_and(|l| l.contains("gpu=\"0\"")));
    assert_eq!(
        val(&m, "gpu_container_memory_limit_bytes{", "hami-a"),
        Some(20000.0 * MIB)
    );
    assert_eq!(
        val(&m, "gpu_container_compute_limit_ratio{", "hami-a"),
        Some(0.3)
    );
    assert_eq!(
        val(&m, "gpu_container_memory_limit_bytes{", "vc-b"),
        Some(30000.0 * MIB)
    );
    assert_eq!(
        val(&m, "gpu_container_compute_limit_ratio{", "vc-b"),
        Some(0.5)
    );
    // Its process is on GPU 0 where the annotation put it: no bypass is reported.
    assert_eq!(val(&m, "gpu_container_unallocated_use{", "hami-a"), None);
    assert_eq!(
        val(&m, "gpu_container_memory_used_bytes{", "hami-a"),
        Some(40000.0 * MIB)
    );

    // KAI: fraction pods on the reservation's GPU, which is no tenant itself.
    assert_eq!(gpu_mode(&m, "1").as_deref(), Some("fractional"));
    let total: f64 = m
        .lines()
        .find(|l| l.starts_with("gpu_memory_total_bytes{") && l.contains("gpu=\"1\""))
        .and_then(|l| l.rsplit_once(' ')?.1.parse().ok())
        .unwrap();
    assert_eq!(
        val(&m, "gpu_container_memory_limit_bytes{", "frac-a"),
        Some((total / 2.0).floor()),
        "half of the GPU's memory"
    );
    assert_eq!(
        val(&m, "gpu_container_memory_limit_bytes{", "frac-b"),
        Some(8000.0 * MIB)
    );
    assert_eq!(
        val(&m, "gpu_container_compute_limit_ratio{", "frac-a"),
        None
    );
    assert!(line(
        &m,
        "gpu_container_allocation{",
        "gpu-reservation-test-node-abcde"
    )
    .is_none());
    assert_eq!(val(&m, "gpu_container_unallocated_use{", "frac-a"), None);

    // MPS: the device plugin's even split, and a client's own lower limits.
    assert_eq!(gpu_mode(&m, "2").as_deref(), Some("mps"));
    assert_eq!(
        val(&m, "gpu_container_compute_limit_ratio{", "mps-a"),
        Some(0.5)
    );
    assert_eq!(
        val(&m, "gpu_container_compute_limit_ratio{", "mps-b"),
        Some(0.2)
    );
    assert_eq!(
        val(&m, "gpu_container_memory_limit_bytes{", "mps-b"),
        Some(1500.0 * MIB)
    );

    // The scheduler is the evidence in /debug/attribution.
    let (status, debug) = e.get("/debug/attribution").unwrap();
    assert_eq!(status, 200);
    assert!(debug.contains("\"fractional\":\"hami\""), "{debug}");
    assert!(debug.contains("\"fractional\":\"kai\""), "{debug}");
    assert!(debug.contains("\"scheduler\":\"volcano-vgpu\""), "{debug}");
    e.stop();
}

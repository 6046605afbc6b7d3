//! Who runs what on the demo node: one pod plan per workload of the demo scenario
//! (crates/fake-nvml/scenarios/demo.yaml), allocated the devices NVML reports.

use std::collections::BTreeMap;

use super::cluster::{ContainerPlan, PodPlan};
use crate::model::GpuSample;

fn labels(app: &str, team: &str) -> BTreeMap<String, String> {
    BTreeMap::from([
        ("app.kubernetes.io/name".to_owned(), app.to_owned()),
        ("team".to_owned(), team.to_owned()),
    ])
}

#[allow(clippy::too_many_arguments)]
fn pod(
    ns: &str,
    name: &str,
    owner: Option<(&str, &str)>,
    app: &str,
    team: &str,
    container: &str,
    resource: &str,
    ids: Vec<String>,
    pids: Vec<u32>,
) -> PodPlan {
    let mut labels = labels(app, team);
    if let Some(("ReplicaSet", rs)) = owner {
        // What lets the API-server source name the Deployment behind a ReplicaSet.
        if let Some((_, hash)) = rs.rsplit_once('-') {
            labels.insert("pod-template-hash".into(), hash.into());
        }
    }
    PodPlan {
        namespace: ns.into(),
        name: name.into(),
        owner: owner.map(|(k, n)| (k.to_owned(), n.to_owned())),
        labels,
        containers: vec![ContainerPlan {
            name: container.into(),
            devices: if ids.is_empty() {
                Vec::new()
            } else {
                vec![(resource.to_owned(), ids)]
            },
            pids,
        }],
    }
}

/// The demo's pods and the kubelet's allocatable device IDs, for the GPUs NVML reported.
pub fn demo_pods(gpus: &[GpuSample]) -> (Vec<PodPlan>, Vec<(String, String)>) {
    let uuid = |i: usize| gpus.get(i).map(|g| g.uuid.clone()).unwrap_or_default();
    let mig = |i: usize, m: usize| {
        gpus.get(i)
            .and_then(|g| g.mig_instances.get(m))
            .map(|m| (format!("nvidia.com/mig-{}", m.profile), m.uuid.clone()))
            .unwrap_or_default()
    };
    let replica = |i: usize, n: usize| format!("{}::{n}", uuid(i));
    let mut pods = vec![
        pod(
            "ml-training",
            "llm-pretrain-0",
            Some(("StatefulSet", "llm-pretrain")),
            "llm-pretrain",
            "foundation",
            "trainer",
            "nvidia.com/gpu",
            vec![uuid(0)],
            vec![41021],
        ),
        pod(
            "ml-training",
            "bert-finetune-6f7d9c8b5-x2k9p",
            Some(("ReplicaSet", "bert-finetune-6f7d9c8b5")),
            "bert-finetune",
            "search",
            "trainer",
            "nvidia.com/gpu",
            vec![uuid(1)],
            vec![41022],
        ),
        pod(
            "research",
            "stale-notebook-carol",
            None,
            "jupyter",
            "research",
            "notebook",
            "nvidia.com/gpu",
            vec![uuid(6)],
            vec![46071],
        ),
        pod(
            "team-a",
            "jupyter-a-0",
            Some(("StatefulSet", "jupyter-a")),
            "jupyter",
            "team-a",
            "notebook",
            "nvidia.com/gpu.shared",
            vec![replica(4, 0)],
            vec![44051],
        ),
        pod(
            "team-b",
            "jupyter-b-0",
            Some(("StatefulSet", "jupyter-b")),
            "jupyter",
            "team-b",
            "notebook",
            "nvidia.com/gpu.shared",
            vec![replica(4, 1)],
            vec![44052],
        ),
        pod(
            "team-c",
            "nightly-eval-28911",
            Some(("Job", "nightly-eval-28911")),
            "eval",
            "team-c",
            "eval",
            "nvidia.com/gpu.shared",
            vec![replica(4, 2)],
            vec![44053, 44054],
        ),
        pod(
            "gpu-operator",
            "nvidia-device-plugin-mps-control-daemon-5hx2k",
            Some(("DaemonSet", "nvidia-device-plugin-mps-control-daemon")),
            "mps-control-daemon",
            "platform",
            "mps-control-daemon",
            "",
            vec![],
            vec![45060],
        ),
    ];
    for (i, name) in ["ranker-a", "ranker-b", "ranker-c"].iter().enumerate() {
        pods.push(pod(
            "serving",
            &format!("{name}-7c5d8f9b6-q{i}x4z"),
            Some(("ReplicaSet", &format!("{name}-7c5d8f9b6"))),
            "ranker",
            "serving",
            "server",
            "nvidia.com/gpu.shared",
            vec![replica(5, i)],
            vec![45061 + i as u32],
        ));
    }
    let gpu2 = [
        (
            "inference",
            "llm-serve-0",
            "llm-serve",
            "StatefulSet",
            42031,
        ),
        ("search", "embedder-0", "embedder", "StatefulSet", 42032),
        ("research", "notebook-alice", "jupyter", "", 42033),
    ];
    for (m, (ns, name, app, kind, pid)) in gpu2.into_iter().enumerate() {
        let (resource, id) = mig(2, m);
        let owner = (!kind.is_empty()).then_some((kind, app));
        pods.push(pod(
            ns,
            name,
            owner,
            app,
            ns,
            "main",
            &resource,
            vec![id],
            vec![pid],
        ));
    }
    for m in 0..5 {
        let (resource, id) = mig(3, m);
        pods.push(pod(
            "inference",
            &format!("whisper-{m}"),
            Some(("StatefulSet", "whisper")),
            "whisper",
            "speech",
            "asr",
            &resource,
            vec![id],
            vec![43041 + m as u32],
        ));
    }
    // Allocated, never used: a notebook that holds a MIG slice with nothing running.
    let (resource, id) = mig(3, 5);
    pods.push(pod(
        "research",
        "notebook-bob",
        None,
        "jupyter",
        "research",
        "notebook",
        &resource,
        vec![id],
        vec![],
    ));

    let mut allocatable: Vec<(String, String)> = [0, 1, 6, 7]
        .iter()
        .map(|&i| ("nvidia.com/gpu".to_owned(), uuid(i)))
        .collect();
    allocatable.extend((0..4).map(|n| ("nvidia.com/gpu.shared".to_owned(), replica(4, n))));
    allocatable.extend((0..3).map(|n| ("nvidia.com/gpu.shared".to_owned(), replica(5, n))));
    for (i, count) in [(2, 3), (3, 7)] {
        allocatable.extend((0..count).map(|m| mig(i, m)));
    }
    (pods, allocatable)
}

//! Who runs what on the demo node: one pod plan per workload of the demo scenario
//! (crates/fake-nvml/scenarios/demo.yaml), allocated the devices NVML reports.

use std::collections::BTreeMap;

use super::cluster::PodPlan;
use tessera_exporter::model::GpuSample;

fn labels(app: &str, team: &str) -> BTreeMap<String, String> {
    BTreeMap::from([
        ("app.kubernetes.io/name".to_owned(), app.to_owned()),
        ("team".to_owned(), team.to_owned()),
    ])
}

#[allow(clippy::too_many_arguments)]
pub(super) fn pod(
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
    let mut plan = PodPlan::single(ns, name, resource, &ids, &pids);
    plan.owner = owner.map(|(k, n)| (k.to_owned(), n.to_owned()));
    plan.labels = labels;
    for c in &mut plan.containers {
        c.name = container.into();
    }
    plan
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
    // A MIG instance offered to several containers: `nvidia.com/mig-<profile>.shared`, IDs
    // `<MIG uuid>::<n>` (the device plugin's renameByDefault replicas).
    let mig_replica = |i: usize, m: usize, n: usize| {
        let (resource, id) = mig(i, m);
        (format!("{resource}.shared"), format!("{id}::{n}"))
    };
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
            // The MPS servers of GPU 5 and of GPU 2's 2g.20gb instance.
            vec![45060, 42030],
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
        // The 2g.20gb instance runs MPS for two services.
        let (resource, id) = if m == 1 {
            mig_replica(2, 1, 0)
        } else {
            mig(2, m)
        };
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
    let (resource, id) = mig_replica(2, 1, 1);
    pods.push(pod(
        "search",
        "reranker-0",
        Some(("StatefulSet", "reranker")),
        "reranker",
        "search",
        "main",
        &resource,
        vec![id],
        vec![42034],
    ));
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
    // A time-sliced MIG slice: a notebook that holds it with nothing running, beside a busy one.
    for (n, name, pids) in [
        (0, "notebook-bob", vec![]),
        (1, "notebook-dave", vec![43046]),
    ] {
        let (resource, id) = mig_replica(3, 5, n);
        pods.push(pod(
            "research",
            name,
            None,
            "jupyter",
            "research",
            "notebook",
            &resource,
            vec![id],
            pids,
        ));
    }
    // GPU 7 is shared by HAMi: the kubelet hands out placeholders; the scheduler's annotation
    // names the GPU and each container's memory (MiB) and SM share (%).
    for (n, name, memory, cores, pid) in [
        (0, "hami-infer-a", 20000, 30, 47081),
        (1, "hami-infer-b", 10000, 0, 47082),
    ] {
        let mut p = pod(
            "inference",
            &format!("{name}-0"),
            Some(("StatefulSet", name)),
            name,
            "inference",
            "main",
            "nvidia.com/gpu",
            vec![format!("{}-{n}", uuid(7))],
            vec![pid],
        );
        p.annotations.insert(
            tessera_exporter::model::fractional::HAMI_ALLOCATED.into(),
            format!("{},NVIDIA,{memory},{cores}:;", uuid(7)),
        );
        pods.push(p);
    }

    let mut allocatable: Vec<(String, String)> = [0, 1, 6]
        .iter()
        .map(|&i| ("nvidia.com/gpu".to_owned(), uuid(i)))
        .collect();
    // HAMi's device plugin offers its GPU deviceSplitCount (here 4) times.
    allocatable.extend((0..4).map(|n| ("nvidia.com/gpu".to_owned(), format!("{}-{n}", uuid(7)))));
    allocatable.extend((0..4).map(|n| ("nvidia.com/gpu.shared".to_owned(), replica(4, n))));
    allocatable.extend((0..3).map(|n| ("nvidia.com/gpu.shared".to_owned(), replica(5, n))));
    for (i, m) in [
        (2, 0),
        (2, 2),
        (3, 0),
        (3, 1),
        (3, 2),
        (3, 3),
        (3, 4),
        (3, 6),
    ] {
        allocatable.push(mig(i, m));
    }
    allocatable.extend((0..2).map(|n| mig_replica(2, 1, n)));
    allocatable.extend((0..2).map(|n| mig_replica(3, 5, n)));
    (pods, allocatable)
}

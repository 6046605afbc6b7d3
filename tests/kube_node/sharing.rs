//! Each way a GPU is offered, as NVIDIA's device plugin names it, held by pods the real kubelet
//! admitted: the allocation comes from the kubelet's pod-resources API, the process's pod from
//! its real cgroup, the names from the API server; every case checks the exact labels.
//!
//! The kubelet picks which of the offered device IDs a container gets; the fake NVML then puts
//! each pod's process on that device, as the NVIDIA container runtime would expose it.

use std::time::Duration;

use serde_json::json;

use super::{
    cgroup_paths, gpu_uuid, gpus, matching, mig_uuid, node, pod, scenario, want, Gpu, SLEEP,
};

const MIB: f64 = 1048576.0;
const LIMIT: Duration = Duration::from_secs(30);

/// The labels a container's series carry.
fn held<'a>(
    ns: &'a str,
    pod: &'a str,
    container: &'a str,
    uuid: &'a str,
    mode: &'a str,
) -> Vec<(&'a str, &'a str)> {
    vec![
        ("namespace", ns),
        ("pod", pod),
        ("container", container),
        ("uuid", uuid),
        ("sharing_mode", mode),
    ]
}

#[test]
#[ignore = "needs a real node: scripts/test-kube-node.sh"]
fn an_exclusive_gpu_and_pods_that_ask_for_none() {
    let n = node();
    let ns = "exclusive";
    let _clean = n.cleanup(ns);
    let (a, b) = (gpu_uuid(0xa), gpu_uuid(0xb));
    n.devices(&[("nvidia.com/gpu", vec![a.clone()])]);
    n.create(pod(
        ns,
        "trainer",
        &[("main", SLEEP, gpus("nvidia.com/gpu", 1))],
    ));
    n.create(pod(ns, "stray", &[("main", SLEEP, json!({}))]));
    n.create(pod(ns, "cpu-only", &[("main", SLEEP, json!({}))]));
    let trainer = n.track("trainer", &n.wait_running(ns, "trainer", "main"));
    let stray = n.track("stray", &n.wait_running(ns, "stray", "main"));
    n.wait_running(ns, "cpu-only", "main");
    assert_eq!(
        (trainer.device.as_str(), stray.device.as_str()),
        (a.as_str(), "")
    );
    // GPU b is offered to nobody; the pod that asked for no GPU runs a process on it anyway.
    let t = n.tessera(&scenario(
        &n,
        &[Gpu::whole(&a), Gpu::whole(&b)],
        &[
            ("trainer", &a, "memory_mib: 4096, sm_util: 40"),
            ("stray", &b, "memory_mib: 512, sm_util: 5"),
        ],
    ));
    let h = held(ns, "trainer", "main", &a, "exclusive");
    let m = t.expect(
        "the exclusive holder and the stray process",
        LIMIT,
        &[
            want(
                "gpu_container_allocation",
                &[("pod", "trainer")],
                &[
                    h.as_slice(),
                    &[("resource", "nvidia.com/gpu"), ("device_id", &a)],
                ]
                .concat(),
            ),
            want(
                "gpu_process_memory_used_bytes",
                &[("pid", &trainer.pid.to_string())],
                &h,
            )
            .value(4096.0 * MIB),
            want("gpu_container_memory_used_bytes", &[("pod", "trainer")], &h),
            // Bypass is reported with its pod, not hidden: the GPU is offered to nobody.
            want(
                "gpu_container_unallocated_use",
                &[("pod", "stray")],
                &held(ns, "stray", "main", &b, "unallocated"),
            )
            .value(1.0),
        ],
    );
    assert!(
        !m.contains(r#"pod="cpu-only""#),
        "a pod with no GPU and no GPU process has no series"
    );
}

#[test]
#[ignore = "needs a real node: scripts/test-kube-node.sh"]
fn time_sliced_replicas_shared_by_two_pods_renamed_or_not() {
    let n = node();
    let ns = "time-slicing";
    let _clean = n.cleanup(ns);
    let (plain, renamed) = (gpu_uuid(0x75), gpu_uuid(0x5a));
    let replicas = |uuid: &str, k: u32| (0..k).map(|i| format!("{uuid}::{i}")).collect::<Vec<_>>();
    n.devices(&[
        ("nvidia.com/gpu", replicas(&plain, 4)),
        ("nvidia.com/gpu.shared", replicas(&renamed, 2)),
    ]);
    let pods = [
        ("a", "nvidia.com/gpu", &plain),
        ("b", "nvidia.com/gpu", &plain),
        ("c", "nvidia.com/gpu.shared", &renamed),
        ("d", "nvidia.com/gpu.shared", &renamed),
    ];
    for (name, resource, _) in &pods {
        n.create(pod(ns, name, &[("main", SLEEP, gpus(resource, 1))]));
    }
    let tracked: Vec<_> = pods
        .iter()
        .map(|(name, _, _)| n.track(name, &n.wait_running(ns, name, "main")))
        .collect();
    let procs: Vec<(&str, &str, &str)> = pods
        .iter()
        .zip(&tracked)
        .map(|((name, ..), t)| (*name, t.device.as_str(), "memory_mib: 1024, sm_util: 20"))
        .collect();
    let t = n.tessera(&scenario(
        &n,
        &[Gpu::whole(&plain), Gpu::whole(&renamed)],
        &procs,
    ));
    let mut wants = Vec::new();
    for ((name, resource, uuid), tr) in pods.iter().zip(&tracked) {
        assert!(
            tr.device.starts_with(&format!("{uuid}::")),
            "{name} got {:?}, not a replica of {uuid}",
            tr.device
        );
        let h = held(ns, name, "main", uuid, "time-slicing");
        wants.push(want(
            "gpu_container_allocation",
            &[("pod", name)],
            &[
                h.as_slice(),
                &[("resource", resource), ("device_id", &tr.device)],
            ]
            .concat(),
        ));
        wants.push(want(
            "gpu_process_memory_used_bytes",
            &[("pid", &tr.pid.to_string())],
            &h,
        ));
    }
    for (uuid, offered) in [(&plain, 4.0), (&renamed, 2.0)] {
        wants.push(
            want(
                "gpu_sharers",
                &[("uuid", uuid)],
                &[("sharing_mode", "time-slicing")],
            )
            .value(2.0),
        );
        wants.push(want("gpu_replicas", &[("uuid", uuid)], &[]).value(offered));
    }
    t.expect("four pods on two time-sliced GPUs", LIMIT, &wants);
}

#[test]
#[ignore = "needs a real node: scripts/test-kube-node.sh"]
fn mps_clients_in_two_pods_and_the_control_daemons_server() {
    let n = node();
    let ns = "mps";
    let _clean = n.cleanup(ns);
    let gpu = gpu_uuid(0x3b5);
    n.devices(&[(
        "nvidia.com/gpu",
        (0..2).map(|i| format!("{gpu}::{i}")).collect(),
    )]);
    // NVIDIA's plugin runs the MPS daemon in a pod of its own that requests no GPU; the server
    // it starts is named nvidia-cuda-mps-server (a script of that name in the test image).
    n.create(pod(
        ns,
        "mps-control-daemon",
        &[(
            "mps-control-daemon",
            "exec /bin/nvidia-cuda-mps-server",
            json!({}),
        )],
    ));
    for name in ["a", "b"] {
        n.create(pod(ns, name, &[("main", SLEEP, gpus("nvidia.com/gpu", 1))]));
    }
    let server = n.track(
        "mps-server",
        &n.wait_running(ns, "mps-control-daemon", "mps-control-daemon"),
    );
    let clients: Vec<_> = ["a", "b"]
        .iter()
        .map(|name| n.track(&format!("mps-{name}"), &n.wait_running(ns, name, "main")))
        .collect();
    let t = n.tessera(&scenario(
        &n,
        &[Gpu {
            keys: "compute_mode: exclusive_process",
            ..Gpu::whole(&gpu)
        }],
        &[
            ("mps-server", &gpu, "kind: mps_server, memory_mib: 300"),
            (
                "mps-a",
                &clients[0].device,
                "kind: mps_client, memory_mib: 2048, sm_util: 30",
            ),
            (
                "mps-b",
                &clients[1].device,
                "kind: mps_client, memory_mib: 1024, sm_util: 10",
            ),
        ],
    ));
    let mut wants = Vec::new();
    for (name, c) in ["a", "b"].iter().zip(&clients) {
        let h = held(ns, name, "main", &gpu, "mps");
        wants.push(want(
            "gpu_process_memory_used_bytes",
            &[("pid", &c.pid.to_string())],
            &[h.as_slice(), &[("type", "mps_client")]].concat(),
        ));
        wants.push(want(
            "gpu_container_allocation",
            &[("pod", name)],
            &[h.as_slice(), &[("device_id", &c.device)]].concat(),
        ));
    }
    let daemon = held(ns, "mps-control-daemon", "mps-control-daemon", &gpu, "mps");
    wants.push(want(
        "gpu_process_memory_used_bytes",
        &[("pid", &server.pid.to_string())],
        &[daemon.as_slice(), &[("type", "mps_server")]].concat(),
    ));
    let m = t.expect("two MPS clients and the server", LIMIT, &wants);
    // The server's pod holds no allocation, and is not flagged for it.
    assert!(
        matching(
            &m,
            "gpu_container_unallocated_use",
            &[("pod", "mps-control-daemon")]
        )
        .iter()
        .all(|s| s.value == 0.0),
        "the MPS server's own pod is exempt"
    );
}

#[test]
#[ignore = "needs a real node: scripts/test-kube-node.sh"]
fn mig_instances_held_by_pods_of_each_qos_class() {
    let n = node();
    let ns = "mig-qos";
    let _clean = n.cleanup(ns);
    let gpu = gpu_uuid(0x319);
    let migs: Vec<String> = (1..=3).map(mig_uuid).collect();
    n.devices(&[("nvidia.com/mig-1g.10gb", migs.clone())]);
    let classes = [
        ("besteffort", json!({})),
        ("burstable", json!({"requests": {"cpu": "10m"}})),
        (
            "guaranteed",
            json!({"requests": {"cpu": "50m", "memory": "32Mi"}, "limits": {"cpu": "50m", "memory": "32Mi"}}),
        ),
    ];
    let mut created = Vec::new();
    for (name, cpu_mem) in &classes {
        let mut resources = gpus("nvidia.com/mig-1g.10gb", 1);
        for part in ["requests", "limits"] {
            for (k, v) in cpu_mem[part].as_object().into_iter().flatten() {
                resources[part][k] = v.clone();
            }
        }
        created.push(n.create(pod(ns, name, &[("main", SLEEP, resources)])));
    }
    let mut tracked = Vec::new();
    for ((name, _), made) in classes.iter().zip(&created) {
        let running = n.wait_running(ns, name, "main");
        let tr = n.track(name, &running);
        let qos = n
            .get(ns, name)
            .and_then(|p| p.status)
            .and_then(|s| s.qos_class);
        assert_eq!(
            qos.unwrap_or_default().to_lowercase(),
            *name,
            "the server's QoS class"
        );
        // The runtime's cgroupfs shape, the same in every hierarchy (v1 controllers, unified).
        let uid = made.metadata.uid.clone().expect("uid");
        let level = if *name == "guaranteed" {
            String::new()
        } else {
            format!("/{name}")
        };
        let shape = format!("/kubepods{level}/pod{uid}/{}", running.id);
        let paths = cgroup_paths(tr.pid);
        assert!(
            paths.len() >= 2 && paths.iter().all(|p| *p == shape),
            "{name}: cgroup paths {paths:?}, expected {shape}"
        );
        eprintln!("{name}: {shape}");
        tracked.push(tr);
    }
    let procs: Vec<(&str, &str, &str)> = classes
        .iter()
        .zip(&tracked)
        .map(|((name, _), t)| (*name, t.device.as_str(), "memory_mib: 900"))
        .collect();
    let t = n.tessera(&scenario(
        &n,
        &[Gpu {
            migs: migs.clone(),
            ..Gpu::whole(&gpu)
        }],
        &procs,
    ));
    let mut wants = Vec::new();
    for ((name, _), tr) in classes.iter().zip(&tracked) {
        assert!(migs.contains(&tr.device), "{name} got {:?}", tr.device);
        let h = [
            held(ns, name, "main", &gpu, "mig").as_slice(),
            &[("mig_uuid", tr.device.as_str())],
        ]
        .concat();
        wants.push(want(
            "gpu_container_allocation",
            &[("pod", name)],
            &[
                h.as_slice(),
                &[
                    ("resource", "nvidia.com/mig-1g.10gb"),
                    ("device_id", &tr.device),
                ],
            ]
            .concat(),
        ));
        wants.push(want(
            "gpu_process_memory_used_bytes",
            &[("pid", &tr.pid.to_string())],
            &h,
        ));
    }
    t.expect("a pod of each QoS class on its MIG instance", LIMIT, &wants);
}

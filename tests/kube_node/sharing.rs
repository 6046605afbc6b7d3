//! Each way a GPU is offered, as NVIDIA's device plugin names it, held by pods the real kubelet
//! admitted: the allocation comes from the kubelet's pod-resources API, the process's pod from
//! its real cgroup, the names from the API server; every case checks the exact labels.

use std::time::Duration;

use serde_json::json;

use super::{
    assert_series, cgroup_paths, gpu_uuid, gpus, has_one, matching, mig_uuid, node, pod, SLEEP,
};

const MIB: f64 = 1048576.0;

fn process_named(m: &str, pid: u32, pod: &str) -> bool {
    has_one(
        m,
        "gpu_process_memory_used_bytes",
        &[("pid", &pid.to_string()), ("pod", pod)],
    )
}

#[test]
#[ignore = "needs a real node: scripts/test-kube-node.sh"]
fn an_exclusive_gpu_and_pods_that_ask_for_none() {
    let n = node();
    let ns = "exclusive";
    n.clean(&[ns]);
    let (a, b) = (gpu_uuid(0xa), gpu_uuid(0xb));
    n.devices(&[("nvidia.com/gpu", vec![a.clone()])]);
    // GPU b is offered to nobody; a pod that asked for no GPU runs a process on it anyway.
    let t = n.tessera(&format!(
        "gpus:
  - {{ sku: h100-80gb-hbm3, uuid: {a} }}
  - {{ sku: h100-80gb-hbm3, uuid: {b} }}
phases:
  - at_ms: 0
    processes:
      - {{ pid_file: {}, gpu: 0, memory_mib: 4096, sm_util: 40 }}
      - {{ pid_file: {}, gpu: 1, memory_mib: 512, sm_util: 5 }}
",
        n.pid_file("trainer").display(),
        n.pid_file("stray").display()
    ));
    n.create(pod(
        ns,
        "trainer",
        &[("main", SLEEP, gpus("nvidia.com/gpu", 1))],
    ));
    n.create(pod(ns, "stray", &[("main", SLEEP, json!({}))]));
    n.create(pod(ns, "cpu-only", &[("main", SLEEP, json!({}))]));
    let trainer = n.track("trainer", &n.wait_running(ns, "trainer", "main"), &a);
    let stray = n.track("stray", &n.wait_running(ns, "stray", "main"), "");
    n.wait_running(ns, "cpu-only", "main");

    let m = t.wait("both processes named", Duration::from_secs(30), |m| {
        process_named(m, trainer, "trainer") && process_named(m, stray, "stray")
    });
    let held = [
        ("namespace", ns),
        ("pod", "trainer"),
        ("container", "main"),
        ("uuid", a.as_str()),
        ("sharing_mode", "exclusive"),
    ];
    assert_series(
        &m,
        "gpu_container_allocation",
        &[("pod", "trainer")],
        &[
            held.as_slice(),
            &[("resource", "nvidia.com/gpu"), ("device_id", a.as_str())],
        ]
        .concat(),
    );
    let p = assert_series(
        &m,
        "gpu_process_memory_used_bytes",
        &[("pid", &trainer.to_string())],
        &held,
    );
    assert_eq!(p.value, 4096.0 * MIB);
    assert_series(&m, "gpu_container_memory_used_bytes", &[("pod", "trainer")], &held);
    // Bypass is reported with its pod, not hidden: the GPU is offered to nobody.
    assert_series(
        &m,
        "gpu_container_unallocated_use",
        &[("pod", "stray")],
        &[
            ("namespace", ns),
            ("container", "main"),
            ("uuid", b.as_str()),
            ("sharing_mode", "unallocated"),
        ],
    );
    assert!(
        !m.contains(r#"pod="cpu-only""#),
        "a pod with no GPU and no GPU process has no series"
    );
    n.clean(&[ns]);
}

#[test]
#[ignore = "needs a real node: scripts/test-kube-node.sh"]
fn time_sliced_replicas_shared_by_two_pods_renamed_or_not() {
    let n = node();
    let ns = "time-slicing";
    n.clean(&[ns]);
    let (plain, renamed) = (gpu_uuid(0x75), gpu_uuid(0x5a));
    let replicas = |uuid: &str, k: u32| (0..k).map(|i| format!("{uuid}::{i}")).collect::<Vec<_>>();
    n.devices(&[
        ("nvidia.com/gpu", replicas(&plain, 4)),
        ("nvidia.com/gpu.shared", replicas(&renamed, 2)),
    ]);
    let pods = [
        ("a", "nvidia.com/gpu", 0, format!("{plain}::0")),
        ("b", "nvidia.com/gpu", 0, format!("{plain}::1")),
        ("c", "nvidia.com/gpu.shared", 1, format!("{renamed}::0")),
        ("d", "nvidia.com/gpu.shared", 1, format!("{renamed}::1")),
    ];
    let procs: String = pods
        .iter()
        .map(|(name, _, gpu, _)| {
            format!(
                "      - {{ pid_file: {}, gpu: {gpu}, memory_mib: 1024, sm_util: 20 }}\n",
                n.pid_file(name).display()
            )
        })
        .collect();
    let t = n.tessera(&format!(
        "gpus:
  - {{ sku: h100-80gb-hbm3, uuid: {plain} }}
  - {{ sku: h100-80gb-hbm3, uuid: {renamed} }}
phases:
  - at_ms: 0
    processes:
{procs}"
    ));
    // One at a time: the kubelet gives each the first free replica in sorted order.
    let mut pids = Vec::new();
    for (name, resource, _, device) in &pods {
        n.create(pod(ns, name, &[("main", SLEEP, gpus(resource, 1))]));
        pids.push(n.track(name, &n.wait_running(ns, name, "main"), device));
    }
    let m = t.wait("all four processes named", Duration::from_secs(30), |m| {
        pods.iter()
            .zip(&pids)
            .all(|((name, ..), pid)| process_named(m, *pid, name))
    });
    for ((name, resource, gpu, device), pid) in pods.iter().zip(&pids) {
        let uuid = if *gpu == 0 { &plain } else { &renamed };
        let held = [
            ("namespace", ns),
            ("pod", *name),
            ("container", "main"),
            ("uuid", uuid.as_str()),
            ("sharing_mode", "time-slicing"),
        ];
        assert_series(
            &m,
            "gpu_container_allocation",
            &[("pod", name)],
            &[
                held.as_slice(),
                &[("resource", resource), ("device_id", device.as_str())],
            ]
            .concat(),
        );
        assert_series(
            &m,
            "gpu_process_memory_used_bytes",
            &[("pid", &pid.to_string())],
            &held,
        );
    }
    for (uuid, offered) in [(&plain, 4.0), (&renamed, 2.0)] {
        let s = assert_series(&m, "gpu_sharers", &[("uuid", uuid)], &[("sharing_mode", "time-slicing")]);
        assert_eq!(s.value, 2.0, "two pods hold {uuid}");
        let r = assert_series(&m, "gpu_replicas", &[("uuid", uuid)], &[]);
        assert_eq!(r.value, offered, "{uuid} is offered {offered} times");
    }
    n.clean(&[ns]);
}

#[test]
#[ignore = "needs a real node: scripts/test-kube-node.sh"]
fn mps_clients_in_two_pods_and_the_control_daemons_server() {
    let n = node();
    let ns = "mps";
    n.clean(&[ns]);
    let gpu = gpu_uuid(0x3b5);
    n.devices(&[(
        "nvidia.com/gpu",
        (0..2).map(|i| format!("{gpu}::{i}")).collect(),
    )]);
    let t = n.tessera(&format!(
        "gpus:
  - {{ sku: h100-80gb-hbm3, uuid: {gpu}, compute_mode: exclusive_process }}
phases:
  - at_ms: 0
    processes:
      - {{ pid_file: {}, gpu: 0, kind: mps_server, memory_mib: 300 }}
      - {{ pid_file: {}, gpu: 0, kind: mps_client, memory_mib: 2048, sm_util: 30 }}
      - {{ pid_file: {}, gpu: 0, kind: mps_client, memory_mib: 1024, sm_util: 10 }}
",
        n.pid_file("mps-server").display(),
        n.pid_file("mps-a").display(),
        n.pid_file("mps-b").display()
    ));
    // NVIDIA's plugin runs the MPS daemon in a pod of its own that requests no GPU; the server
    // it starts is named nvidia-cuda-mps-server (a script of that name in the test image).
    n.create(pod(
        ns,
        "mps-control-daemon",
        &[("mps-control-daemon", "exec /bin/nvidia-cuda-mps-server", json!({}))],
    ));
    let server = n.track(
        "mps-server",
        &n.wait_running(ns, "mps-control-daemon", "mps-control-daemon"),
        "",
    );
    let mut pids = Vec::new();
    for (i, name) in ["a", "b"].iter().enumerate() {
        n.create(pod(ns, name, &[("main", SLEEP, gpus("nvidia.com/gpu", 1))]));
        let device = format!("{gpu}::{i}");
        pids.push(n.track(&format!("mps-{name}"), &n.wait_running(ns, name, "main"), &device));
    }
    let m = t.wait("the server and both clients named", Duration::from_secs(30), |m| {
        process_named(m, server, "mps-control-daemon")
            && process_named(m, pids[0], "a")
            && process_named(m, pids[1], "b")
    });
    for (name, pid) in ["a", "b"].iter().zip(&pids) {
        assert_series(
            &m,
            "gpu_process_memory_used_bytes",
            &[("pid", &pid.to_string())],
            &[
                ("namespace", ns),
                ("pod", name),
                ("container", "main"),
                ("uuid", gpu.as_str()),
                ("sharing_mode", "mps"),
                ("type", "mps_client"),
            ],
        );
    }
    assert_series(
        &m,
        "gpu_process_memory_used_bytes",
        &[("pid", &server.to_string())],
        &[
            ("namespace", ns),
            ("pod", "mps-control-daemon"),
            ("container", "mps-control-daemon"),
            ("sharing_mode", "mps"),
            ("type", "mps_server"),
        ],
    );
    // The server's pod holds no allocation, and is not flagged for it.
    assert!(
        matching(&m, "gpu_container_unallocated_use", &[("pod", "mps-control-daemon")])
            .iter()
            .all(|s| s.value == 0.0),
        "the MPS server's own pod is exempt"
    );
    n.clean(&[ns]);
}

#[test]
#[ignore = "needs a real node: scripts/test-kube-node.sh"]
fn mig_instances_held_by_pods_of_each_qos_class() {
    let n = node();
    let ns = "mig-qos";
    n.clean(&[ns]);
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
    let instances: String = migs
        .iter()
        .map(|u| format!("      - {{ profile: 1g.10gb, uuid: {u} }}\n"))
        .collect();
    let procs: String = classes
        .iter()
        .enumerate()
        .map(|(i, (name, _))| {
            format!(
                "      - {{ pid_file: {}, gpu: 0, mig_instance: {i}, memory_mib: 900 }}\n",
                n.pid_file(name).display()
            )
        })
        .collect();
    let t = n.tessera(&format!(
        "gpus:
  - sku: h100-80gb-hbm3
    uuid: {gpu}
    mig:
      instances:
{instances}phases:
  - at_ms: 0
    processes:
{procs}"
    ));
    let mut pids = Vec::new();
    for ((name, cpu_mem), mig) in classes.iter().zip(&migs) {
        let mut resources = gpus("nvidia.com/mig-1g.10gb", 1);
        for part in ["requests", "limits"] {
            if let Some(extra) = cpu_mem[part].as_object() {
                for (k, v) in extra {
                    resources[part][k] = v.clone();
                }
            }
        }
        let created = n.create(pod(ns, name, &[("main", SLEEP, resources)]));
        let running = n.wait_running(ns, name, "main");
        let pid = n.track(name, &running, mig);
        let ran = n.get(ns, name).expect("pod");
        let qos = ran.status.and_then(|s| s.qos_class).unwrap_or_default();
        assert_eq!(qos.to_lowercase(), *name, "the server's QoS class");
        // The runtime's cgroupfs shape, in every hierarchy (v1 controllers and the unified tree).
        let uid = created.metadata.uid.expect("uid");
        let level = if *name == "guaranteed" {
            String::new()
        } else {
            format!("/{name}")
        };
        let want = format!("/kubepods{level}/pod{uid}/{}", running.id);
        let paths = cgroup_paths(pid);
        assert!(
            paths.len() >= 2 && paths.iter().all(|p| *p == want),
            "{name}: cgroup paths {paths:?}, expected {want}"
        );
        pids.push(pid);
    }
    let m = t.wait("the three processes named", Duration::from_secs(30), |m| {
        classes
            .iter()
            .zip(&pids)
            .all(|((name, _), pid)| process_named(m, *pid, name))
    });
    for (((name, _), mig), pid) in classes.iter().zip(&migs).zip(&pids) {
        let held = [
            ("namespace", ns),
            ("pod", *name),
            ("container", "main"),
            ("uuid", gpu.as_str()),
            ("mig_uuid", mig.as_str()),
            ("sharing_mode", "mig"),
        ];
        assert_series(
            &m,
            "gpu_container_allocation",
            &[("pod", name)],
            &[
                held.as_slice(),
                &[("resource", "nvidia.com/mig-1g.10gb"), ("device_id", mig.as_str())],
            ]
            .concat(),
        );
        assert_series(
            &m,
            "gpu_process_memory_used_bytes",
            &[("pid", &pid.to_string())],
            &held,
        );
    }
    n.clean(&[ns]);
}

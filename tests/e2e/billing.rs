//! Figures a bill can use, end to end: the real binary, the fake NVML library, a fake kubelet
//! and API server, a procfs tree with the pods' cgroups, and fake probe clients speaking the
//! probe's wire over tessera's socket (the kernel names them, so they are real processes).
//! One GPU per case:
//!
//! | GPU | case | expected split |
//! |---|---|---|
//! | 0 | one container, two active processes | sole-active-container |
//! | 1 | one pod, two containers active | sole-active-pod |
//! | 2 | an unprobed container beside an honest probed one | by-difference |
//! | 3 | a probed tenant hiding its kernels (under-reports to nothing) | disputed: stretched-alone |
//! | 4 | a probed tenant claiming more than the GPU measured | disputed: over-claimed |
//! | 5 | a probe reporting a clock 5 s off | disputed: clock |
//! | 6 | a probe that goes silent mid-run | disputed: probe-silent |
//! | 7 | two honest probed tenants (control) | probe |
//! | 8 | a probed tenant claiming nothing beside an unprobed one | disputed: claims-nothing |

use std::process::Child;

use crate::support::{Clients, Exporter};
use tessera_demo::cluster::{self, ContainerPlan, PodPlan};
use tessera_demo::fakes::apiserver::{FakeApiServer, FakeCluster};
use tessera_demo::fakes::kubelet::FakeKubelet;

const NODE: &str = "test-node";

fn uuid(g: usize) -> String {
    format!("GPU-b111{g:04}-0000-0000-0000-000000000000")
}

/// A fake probe client. It reports, once every 0.2 s, kernel spans of `covered` of every
/// second and a per-millisecond timeline in which its kernels cover `covered` of each
/// millisecond and their solo durations explain `solo` (wire version 2). Its clock is the wall
/// clock plus `clock_offset` seconds; after `silent_after` seconds (0: never) it stops
/// reporting but keeps running, as a probe that broke or was switched off would.
struct Probe {
    covered: f64,
    solo: f64,
    clock_offset: f64,
    silent_after: f64,
}

impl Probe {
    fn honest(covered: f64, solo: f64) -> Self {
        Probe {
            covered,
            solo,
            clock_offset: 0.0,
            silent_after: 0.0,
        }
    }

    fn spawn(&self, socket: &std::path::Path) -> Child {
        crate::support::fake_probe_client(
            socket,
            &[
                format!("--covered={}", self.covered),
                format!("--solo={}", self.solo),
                format!("--clock-offset={}", self.clock_offset),
                format!("--silent-after={}", self.silent_after),
            ],
        )
    }
}

/// One process on one GPU: its NVML booking (percent) and CPU use (percent of a core).
struct Proc {
    pid: u32,
    gpu: usize,
    sm: u32,
    cpu: u32,
}

fn shared_pod(ns: &str, name: &str, gpu: usize, replica: u32, pids: &[u32]) -> PodPlan {
    PodPlan {
        owner: Some(("StatefulSet".into(), name.into())),
        ..PodPlan::single(
            ns,
            &format!("{name}-0"),
            "nvidia.com/gpu.shared",
            &[format!("{}::{replica}", uuid(gpu))],
            pids,
        )
    }
}

fn scenario(dir: &std::path::Path, utilization: &[u32], procs: &[Proc]) -> std::path::PathBuf {
    let mut y = String::from("gpus:\n");
    for g in 0..utilization.len() {
        y += &format!("  - {{ sku: h100-80gb-hbm3, uuid: {} }}\n", uuid(g));
    }
    y += "phases:\n  - at_ms: 0\n    gpus:\n";
    for (g, u) in utilization.iter().enumerate() {
        y += &format!("      - {{ gpu: {g}, utilization: {u} }}\n");
    }
    y += "    processes:\n";
    for p in procs {
        y += &format!(
            "      - {{ pid: {}, gpu: {}, comm: python3, memory_mib: 1000, sm_util: {}, cpu_percent: {} }}\n",
            p.pid, p.gpu, p.sm, p.cpu
        );
    }
    let path = dir.join("billing.yaml");
    std::fs::write(&path, y).expect("scenario");
    path
}

/// The method `gpu_compute_split_info` names for GPU `g`.
fn method(m: &str, g: usize) -> Option<String> {
    let gpu = format!("gpu=\"{g}\"");
    m.lines()
        .find(|l| l.starts_with("gpu_compute_split_info{") && l.contains(&gpu))
        .and_then(|l| l.split("method=\"").nth(1)?.split('"').next())
        .map(str::to_owned)
}

fn line_value(m: &str, family: &str, needles: &[&str]) -> Option<f64> {
    m.lines()
        .find(|l| l.starts_with(family) && needles.iter().all(|n| l.contains(n)))
        .and_then(|l| l.rsplit_once(' ')?.1.parse().ok())
}

#[test]
fn every_figure_the_evidence_allows_and_none_a_lying_probe_could_shift() {
    let rt = crate::support::fake_cluster_runtime();
    let dir = tempfile::tempdir().expect("tempdir");
    let socket = dir.path().join("probe.sock");
    let kubelet_socket = dir.path().join("kubelet.sock");

    // Probe clients, by GPU: (gpu, probe).
    let probes: Vec<(usize, Probe)> = vec![
        (2, Probe::honest(0.8, 0.3)),
        (3, Probe::honest(0.8, 0.3)),
        (3, Probe::honest(0.0, 0.0)),
        (4, Probe::honest(1.0, 1.0)),
        (4, Probe::honest(0.3, 0.3)),
        (5, Probe::honest(0.8, 0.3)),
        (
            5,
            Probe {
                clock_offset: 5.0,
                ..Probe::honest(0.8, 0.5)
            },
        ),
        (
            6,
            Probe {
                silent_after: 5.0,
                ..Probe::honest(0.8, 0.5)
            },
        ),
        (6, Probe::honest(0.8, 0.3)),
        (7, Probe::honest(0.8, 0.3)),
        (7, Probe::honest(0.8, 0.5)),
        (8, Probe::honest(0.0, 0.0)),
    ];
    let clients = Clients(probes.iter().map(|(_, p)| p.spawn(&socket)).collect());
    let pid = |i: usize| clients.0[i].id();

    let procs = vec![
        Proc {
            pid: 9001,
            gpu: 0,
            sm: 50,
            cpu: 40,
        },
        Proc {
            pid: 9002,
            gpu: 0,
            sm: 10,
            cpu: 40,
        },
        Proc {
            pid: 9011,
            gpu: 1,
            sm: 40,
            cpu: 40,
        },
        Proc {
            pid: 9012,
            gpu: 1,
            sm: 10,
            cpu: 40,
        },
        Proc {
            pid: 9021,
            gpu: 2,
            sm: 60,
            cpu: 40,
        },
        Proc {
            pid: pid(0),
            gpu: 2,
            sm: 20,
            cpu: 40,
        },
        // The hider: NVML books it nothing here, so only the co-tenant's stretched kernels
        // give it away.
        Proc {
            pid: pid(1),
            gpu: 3,
            sm: 30,
            cpu: 40,
        },
        Proc {
            pid: pid(2),
            gpu: 3,
            sm: 0,
            cpu: 40,
        },
        Proc {
            pid: pid(3),
            gpu: 4,
            sm: 30,
            cpu: 40,
        },
        Proc {
            pid: pid(4),
            gpu: 4,
            sm: 20,
            cpu: 40,
        },
        Proc {
            pid: pid(5),
            gpu: 5,
            sm: 30,
            cpu: 40,
        },
        Proc {
            pid: pid(6),
            gpu: 5,
            sm: 50,
            cpu: 40,
        },
        Proc {
            pid: pid(7),
            gpu: 6,
            sm: 50,
            cpu: 40,
        },
        Proc {
            pid: pid(8),
            gpu: 6,
            sm: 30,
            cpu: 40,
        },
        Proc {
            pid: pid(9),
            gpu: 7,
            sm: 30,
            cpu: 40,
        },
        Proc {
            pid: pid(10),
            gpu: 7,
            sm: 50,
            cpu: 40,
        },
        Proc {
            pid: 9081,
            gpu: 8,
            sm: 60,
            cpu: 40,
        },
        Proc {
            pid: pid(11),
            gpu: 8,
            sm: 0,
            cpu: 40,
        },
    ];
    let path = scenario(dir.path(), &[72, 50, 80, 80, 50, 80, 80, 80, 80], &procs);

    let mut plans = vec![
        PodPlan {
            owner: Some(("Deployment".into(), "triton".into())),
            ..PodPlan::single(
                "ml",
                "triton-0",
                "nvidia.com/gpu",
                &[uuid(0)],
                &[9001, 9002],
            )
        },
        PodPlan {
            namespace: "ml".into(),
            name: "ray-0".into(),
            owner: Some(("StatefulSet".into(), "ray".into())),
            containers: vec![
                ContainerPlan {
                    name: "head".into(),
                    devices: vec![("nvidia.com/gpu".into(), vec![uuid(1)])],
                    pids: vec![9011],
                    ..Default::default()
                },
                ContainerPlan {
                    name: "actor".into(),
                    pids: vec![9012],
                    ..Default::default()
                },
            ],
            ..Default::default()
        },
    ];
    // Two time-sliced tenants on each GPU from 2 on: the first process's pod in team-a, the
    // second's in team-b.
    for g in 2..9 {
        let on: Vec<u32> = procs.iter().filter(|p| p.gpu == g).map(|p| p.pid).collect();
        plans.push(shared_pod("team-a", &format!("a{g}"), g, 0, &on[..1]));
        plans.push(shared_pod("team-b", &format!("b{g}"), g, 1, &on[1..]));
    }
    let mut allocatable = vec![
        ("nvidia.com/gpu".to_owned(), uuid(0)),
        ("nvidia.com/gpu".to_owned(), uuid(1)),
    ];
    for g in 2..9 {
        for r in 0..2 {
            allocatable.push(("nvidia.com/gpu.shared".into(), format!("{}::{r}", uuid(g))));
        }
    }
    let api = rt
        .block_on(FakeApiServer::start(FakeCluster {
            pods: plans.iter().map(|p| p.to_pod(NODE)).collect(),
            nodes: vec![cluster::node(NODE, Default::default())],
            ..Default::default()
        }))
        .expect("api server");
    let _kubelet = rt
        .block_on(FakeKubelet::start(
            &kubelet_socket,
            cluster::kubelet_state(&plans, allocatable),
        ))
        .expect("kubelet");

    let e = Exporter::builder(&path)
        .in_fake_cluster(dir.path(), &api.url(), plans, &kubelet_socket)
        .arg(format!("--probe.socket={}", socket.display()))
        .arg("--web.enable-debug=true")
        .start();
    let want = [
        (0, "sole-active-container"),
        (1, "sole-active-pod"),
        (2, "by-difference"),
        (3, "disputed"),
        (4, "disputed"),
        (5, "disputed"),
        (6, "disputed"),
        (7, "probe"),
        (8, "disputed"),
    ];
    let mut last = String::new();
    let settled = (0..400).any(|_| {
        last = e.metrics();
        let ok = want
            .iter()
            .all(|(g, w)| method(&last, *g).as_deref() == Some(*w));
        if !ok {
            std::thread::sleep(std::time::Duration::from_millis(100));
        }
        ok
    });
    let got: Vec<_> = want.iter().map(|(g, _)| method(&last, *g)).collect();
    assert!(
        settled,
        "methods {got:?}\n{}",
        e.get("/debug/attribution").map(|x| x.1).unwrap_or_default()
    );
    let m = last;

    // 0: the container gets the GPU's reading; its processes' shares stay withheld.
    let triton = ["pod=\"triton-0\"", "container=\"main\""];
    assert_eq!(
        line_value(&m, "gpu_container_sm_utilization_ratio{", &triton),
        Some(0.72),
        "{m}"
    );
    assert_eq!(
        line_value(&m, "gpu_process_sm_utilization_ratio{", &["pid=\"9001\""]),
        None
    );
    assert_eq!(
        line_value(&m, "gpu_container_idle{", &triton),
        Some(0.0),
        "a busy container is not idle"
    );
    // 1: the pod gets it, neither container does.
    assert_eq!(
        line_value(&m, "gpu_pod_sm_utilization_ratio{", &["pod=\"ray-0\""]),
        Some(0.5)
    );
    assert_eq!(
        line_value(
            &m,
            "gpu_container_sm_utilization_ratio{",
            &["pod=\"ray-0\""]
        ),
        None
    );
    assert!(
        line_value(
            &m,
            "gpu_pod_attributed_seconds_total{",
            &["pod=\"ray-0\"", "method=\"sole-active-pod\""]
        )
        .is_some_and(|v| v > 0.0),
        "{m}"
    );
    // 2: the unprobed tenant gets the busy time less the probed one's solo part.
    let a2 = line_value(&m, "gpu_container_sm_utilization_ratio{", &["pod=\"a2-0\""]);
    assert!(a2.is_some_and(|v| (v - 0.5).abs() < 0.03), "{a2:?}\n{m}");
    let b2 = line_value(&m, "gpu_container_sm_utilization_ratio{", &["pod=\"b2-0\""]);
    assert!(b2.is_some_and(|v| (v - 0.3).abs() < 0.03), "{b2:?}");
    assert!(line_value(
        &m,
        "gpu_pod_attributed_seconds_total{",
        &["pod=\"a2-0\"", "method=\"by-difference\""]
    )
    .is_some());
    // 3..6, 8: disputed, with the reason counted, and nobody charged.
    for (g, reason) in [
        (3, "stretched-alone"),
        (4, "over-claimed"),
        (5, "clock"),
        (6, "probe-silent"),
        (8, "claims-nothing"),
    ] {
        let gpu = format!("gpu=\"{g}\"");
        let r = format!("reason=\"{reason}\"");
        assert!(
            line_value(&m, "gpu_compute_split_disputed_total{", &[&gpu, &r])
                .is_some_and(|v| v > 0.0),
            "GPU {g}: no {reason} dispute\n{m}"
        );
        for pod in ["a", "b"] {
            let p = format!("pod=\"{pod}{g}-0\"");
            assert_eq!(
                line_value(&m, "gpu_container_sm_utilization_ratio{", &[&p]),
                None,
                "GPU {g}: {pod} charged on a disputed split"
            );
            assert!(
                line_value(&m, "gpu_container_idle{", &[&p]) != Some(1.0),
                "GPU {g}: {pod} called idle"
            );
        }
    }
    // 7: the honest pair is split by its timelines.
    let a7 = line_value(&m, "gpu_container_sm_utilization_ratio{", &["pod=\"a7-0\""]);
    let b7 = line_value(&m, "gpu_container_sm_utilization_ratio{", &["pod=\"b7-0\""]);
    assert!(
        a7.is_some_and(|v| (v - 0.3).abs() < 0.03) && b7.is_some_and(|v| (v - 0.5).abs() < 0.03),
        "{a7:?} {b7:?}"
    );
    // Coverage: every busy GPU counts its busy time; the disputed ones attribute nothing.
    for g in [3, 4, 5, 6, 8] {
        let gpu = format!("gpu=\"{g}\"");
        assert!(line_value(&m, "gpu_compute_busy_seconds_total{", &[&gpu]).is_some_and(|v| v > 0.0));
    }

    // /debug/attribution says which rule gave each figure, and why.
    let (status, debug) = e.get("/debug/attribution").expect("debug");
    assert_eq!(status, 200);
    for needle in [
        "\"sole-active-container\"",
        "\"sole-active-pod\"",
        "\"by-difference\"",
        "\"stretched-alone\"",
        "the device's busy time less theirs",
    ] {
        assert!(debug.contains(needle), "{needle} missing from {debug}");
    }
    e.stop();
    drop(clients);
}

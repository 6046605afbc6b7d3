//! The energy split through the whole join: a node's samples over time, the GPUs' counters
//! read every ten seconds as NVML's slow cadence does.

use std::collections::{BTreeMap, HashMap};

use crate::model::allocations::{Allocations, ContainerAllocation, ResourceDevices};
use crate::model::cluster::{ClusterView, ContainerMeta, PodMeta};
use crate::model::compute::ActivityInputs;
use crate::model::energy::{Remainder, State};
use crate::model::identity::{CgroupIdentity, ContainerRuntime};
use crate::model::join::{join, JoinInputs};
use crate::model::testkit;
use crate::model::view::{ContainerUse, Snapshot};
use crate::model::{GpmActivity, GpuSample, MigSample, NvmlSample};

const G0: &str = "GPU-0fc3eda5-e98b-a25b-5b0d-cf5c855d1448";
const G1: &str = "GPU-00552014-5c87-89ac-b1a6-7b53aa24b0ec";
const M3: &str = "MIG-3a000000-0000-4000-8000-000000000001";
const M1: &str = "MIG-3a000000-0000-4000-8000-000000000002";
const H100: &str = "NVIDIA H100 80GB HBM3";

fn holder(pod: &str, ids: &[&str]) -> ContainerAllocation {
    ContainerAllocation {
        namespace: "ml".into(),
        pod: pod.into(),
        container: "main".into(),
        devices: vec![ResourceDevices {
            resource_name: "nvidia.com/gpu".into(),
            device_ids: ids.iter().map(|s| s.to_string()).collect(),
        }],
        dynamic: vec![],
    }
}

fn pod(name: &str) -> PodMeta {
    PodMeta {
        uid: format!("uid-{name}"),
        namespace: "ml".into(),
        name: name.into(),
        containers: vec![ContainerMeta {
            name: "main".into(),
            container_id: Some(format!("cid-{name}")),
        }],
        ..Default::default()
    }
}

/// A node's kubelet, API server and cgroups: pod `p` runs pid `n` for each `(p, n)`.
struct Node {
    allocations: Allocations,
    cluster: ClusterView,
    cgroups: HashMap<u32, CgroupIdentity>,
}

fn node(holders: Vec<ContainerAllocation>, pids: &[(&str, u32)]) -> Node {
    let pods = holders.iter().map(|h| pod(&h.pod)).collect();
    Node {
        allocations: Allocations {
            containers: holders,
            ..Default::default()
        },
        cluster: ClusterView::new(pods, BTreeMap::new(), vec![]),
        cgroups: pids
            .iter()
            .map(|(p, pid)| {
                let id = CgroupIdentity {
                    pod_uid: Some(format!("uid-{p}")),
                    container_id: Some(format!("cid-{p}")),
                    runtime: ContainerRuntime::Containerd,
                    qos: None,
                };
                (*pid, id)
            })
            .collect(),
    }
}

/// One GPU's reading at one second: utilization, power, and the processes running kernels
/// (each at `share` of the device by NVML) or only holding memory.
fn gpu(uuid: &str, index: u32, util: f64, watts: f64, running: &[(u32, f64)]) -> GpuSample {
    GpuSample {
        index,
        uuid: uuid.into(),
        model: H100.into(),
        up: true,
        utilization: Some(util),
        power_watts: Some(watts),
        sm_clock_hertz: Some(if util > 0.0 { 1980e6 } else { 345e6 }),
        memory_clock_hertz: Some(2619e6),
        processes: running
            .iter()
            .map(|(pid, share)| testkit::compute_process(*pid, Some(*share)))
            .collect(),
        ..Default::default()
    }
}

/// Runs `seconds` samples one second apart from `t0`, each GPU's counter integrating its
/// power and read every ten seconds; returns every snapshot.
struct Run<'a> {
    node: &'a Node,
    previous: Option<Snapshot>,
    /// Each GPU's true energy, and what its counter last read.
    energy: Vec<(f64, f64)>,
    t: f64,
    snapshots: Vec<Snapshot>,
}

impl<'a> Run<'a> {
    fn new(node: &'a Node, gpus: usize) -> Self {
        Run {
            node,
            previous: None,
            energy: vec![(1e6, 1e6); gpus],
            t: 0.0,
            snapshots: Vec::new(),
        }
    }

    /// One second: `gpus` (their counters are filled here), and the CPU cores each pid used.
    fn second(&mut self, mut gpus: Vec<GpuSample>, cpu: &[(u32, f64)]) {
        self.t += 1.0;
        for (g, (truth, read)) in gpus.iter_mut().zip(&mut self.energy) {
            // The counter integrates what the board drew, whatever the power reading said.
            *truth += g
                .power_watts
                .filter(|w| w.is_finite() && *w >= 0.0)
                .unwrap_or(0.0);
            // Read at the first sample and every ten seconds, carried in between.
            if self.t == 1.0 || (self.t as u64) % 10 == 0 {
                *read = *truth;
            }
            g.energy_joules = Some(*read);
        }
        let nvml = NvmlSample {
            gpus,
            ..Default::default()
        };
        let activity = ActivityInputs {
            cpu_cores: cpu.iter().copied().collect(),
            window_seconds: 5.0,
            timeline_lag_seconds: 0.0,
            ..Default::default()
        };
        let s = join(JoinInputs {
            timestamp_seconds: self.t,
            allocations: Some(&self.node.allocations),
            cluster: Some(&self.node.cluster),
            cgroups: &self.node.cgroups,
            activity: &activity,
            previous: self.previous.as_ref(),
            ..testkit::inputs(&nvml)
        });
        self.previous = Some(s.clone());
        self.snapshots.push(s);
    }
}

fn row<'s>(s: &'s Snapshot, gpu: usize, pod: &str) -> &'s ContainerUse {
    s.gpus[gpu]
        .containers
        .iter()
        .find(|c| c.pod.pod == pod)
        .unwrap_or_else(|| panic!("no row for {pod}"))
}

fn charged(s: &Snapshot, gpu: usize, pod: &str, state: State) -> f64 {
    row(s, gpu, pod).energy.joules.get(state).unwrap_or(0.0)
}

/// Σ containers + Σ nobody, against the counter's increase since the account began.
fn assert_conserved(run: &Run<'_>) {
    let first: Vec<Option<f64>> = (0..run.energy.len())
        .map(|g| {
            run.snapshots
                .iter()
                .find_map(|s| {
                    s.gpus[g]
                        .energy
                        .mark
                        .map(|_| s.gpus[g].sample.energy_joules)
                })
                .flatten()
        })
        .collect();
    for s in &run.snapshots {
        for (g, v) in s.gpus.iter().enumerate() {
            let (Some(start), Some(now)) = (first[g], v.sample.energy_joules) else {
                continue;
            };
            let split: f64 = v.containers.iter().map(|c| c.energy.total()).sum::<f64>()
                + v.energy.remainder.values().sum::<f64>();
            assert!(
                (split - (now - start)).abs() <= 1e-6 * (now - start).max(1.0),
                "t={} gpu {g}: split {split} vs counter increase {}",
                s.timestamp_seconds,
                now - start
            );
        }
    }
}

/// No container's counter, nor any reason's, ever goes back.
fn assert_monotonic(run: &Run<'_>) {
    for w in run.snapshots.windows(2) {
        for (a, b) in w[0].gpus.iter().zip(&w[1].gpus) {
            for (r, v) in &a.energy.remainder {
                assert!(b.energy.remainder.get(r).copied().unwrap_or(0.0) >= *v);
            }
            for ca in &a.containers {
                let Some(cb) = b.containers.iter().find(|c| c.pod == ca.pod) else {
                    continue;
                };
                for (st, v) in ca.energy.joules.iter() {
                    assert!(cb.energy.joules.get(st).unwrap_or(0.0) >= v);
                }
                assert!(cb.energy.dynamic_joules >= ca.energy.dynamic_joules);
            }
        }
    }
}

#[test]
fn an_idle_holder_pays_half_the_floor_and_none_of_its_busy_co_tenant_s_work() {
    let n = node(
        vec![
            holder("a", &[&format!("{G0}::0")]),
            holder("b", &[&format!("{G0}::1")]),
        ],
        &[("a", 10), ("b", 20)],
    );
    let mut run = Run::new(&n, 1);
    // 40 s idle at 80 W: a's process holds memory and sleeps. The floor is learned.
    for _ in 0..40 {
        run.second(vec![gpu(G0, 0, 0.0, 80.0, &[(10, 0.0)])], &[(10, 0.0)]);
    }
    let s = run.snapshots.last().cloned().unwrap();
    assert_eq!(s.gpus[0].energy.floor_watts, Some(80.0));
    let (a0, b0) = (
        charged(&s, 0, "a", State::Idle),
        charged(&s, 0, "b", State::Idle),
    );
    // 60 s: a runs at 70 %, 360 W; b holds its replica and runs nothing.
    for _ in 0..60 {
        run.second(vec![gpu(G0, 0, 0.7, 360.0, &[(10, 0.7)])], &[(10, 0.9)]);
    }
    let s = run.snapshots.last().cloned().unwrap();
    let b_idle = charged(&s, 0, "b", State::Idle) - b0;
    assert!((b_idle - 40.0 * 60.0).abs() < 1e-6, "b: {b_idle}");
    assert_eq!(charged(&s, 0, "b", State::NotIdle), 0.0);
    assert_eq!(
        charged(&s, 0, "a", State::Idle) - a0,
        0.0,
        "no busy tenant's energy counts as waste"
    );
    let a_busy = charged(&s, 0, "a", State::NotIdle);
    assert!((a_busy - 320.0 * 60.0).abs() < 1e-6, "a: {a_busy}");
    assert!((row(&s, 0, "a").energy.dynamic_joules - 280.0 * 60.0).abs() < 1e-6);
    assert!(
        s.gpus[0].energy.remainder.is_empty(),
        "{:?}",
        s.gpus[0].energy.remainder
    );
    // 30 s both run kernels, no probe: the work is withheld, the floor still split.
    for _ in 0..30 {
        run.second(
            vec![gpu(G0, 0, 0.9, 440.0, &[(10, 0.5), (20, 0.4)])],
            &[(10, 0.9), (20, 0.9)],
        );
    }
    let end = run.snapshots.last().cloned().unwrap();
    let withheld = end.gpus[0].energy.remainder[&Remainder::Withheld];
    assert!((withheld - 360.0 * 30.0).abs() < 1e-6, "{withheld}");
    assert!((charged(&end, 0, "b", State::NotIdle) - 40.0 * 30.0).abs() < 1e-6);
    assert_conserved(&run);
    assert_monotonic(&run);
}

#[test]
fn a_snapshot_mid_account_serialises_for_the_debug_page() {
    // Between two counter readings estimates are pending, keyed by container: the debug page
    // must still render (JSON keys are strings).
    let n = node(vec![holder("a", &[G0])], &[("a", 10)]);
    let mut run = Run::new(&n, 1);
    // Credited at 10 s, pending since.
    for _ in 0..12 {
        run.second(vec![gpu(G0, 0, 0.5, 300.0, &[(10, 0.5)])], &[(10, 0.9)]);
    }
    let s = run.snapshots.last().cloned().unwrap();
    assert!(!s.gpus[0].energy.pending.is_empty());
    let json = serde_json::to_value(&s).expect("the snapshot serialises");
    assert!(json["gpus"][0]["energy"]["pending_joules"].as_f64() > Some(0.0));
    assert!(json["gpus"][0]["containers"][0]["energy"]["joules"]["not-idle"].as_f64() > Some(0.0));
}

#[test]
fn before_any_floor_is_known_a_shared_gpu_s_energy_goes_to_nobody_and_still_adds_up() {
    let n = node(
        vec![
            holder("a", &[&format!("{G0}::0")]),
            holder("b", &[&format!("{G0}::1")]),
        ],
        &[("a", 10)],
    );
    let mut run = Run::new(&n, 1);
    for _ in 0..35 {
        run.second(vec![gpu(G0, 0, 0.5, 300.0, &[(10, 0.5)])], &[(10, 0.9)]);
    }
    let s = run.snapshots.last().cloned().unwrap();
    assert_eq!(s.gpus[0].energy.floor_watts, None);
    assert!(s.gpus[0].energy.remainder[&Remainder::FloorUnknown] > 0.0);
    assert!(s.gpus[0].containers.iter().all(|c| c.energy.total() == 0.0));
    assert_conserved(&run);
}

#[test]
fn a_gpu_never_idle_takes_its_idle_sibling_s_floor() {
    let n = node(
        vec![
            holder("a", &[&format!("{G0}::0")]),
            holder("b", &[&format!("{G0}::1")]),
            holder("c", &[G1]),
        ],
        &[("a", 10), ("c", 30)],
    );
    let mut run = Run::new(&n, 2);
    for _ in 0..45 {
        run.second(
            vec![
                gpu(G0, 0, 0.5, 300.0, &[(10, 0.5)]),
                gpu(G1, 1, 0.0, 76.0, &[(30, 0.0)]),
            ],
            &[(10, 0.9), (30, 0.0)],
        );
    }
    let s = run.snapshots.last().cloned().unwrap();
    assert_eq!(s.gpus[1].energy.floor_watts, Some(76.0));
    assert_eq!(s.gpus[0].energy.floor_watts, Some(76.0));
    assert!(charged(&s, 0, "b", State::Idle) > 0.0);
    assert!(
        charged(&s, 1, "c", State::Idle) > 0.0,
        "an idle GPU needs no floor"
    );
    assert_conserved(&run);
    assert_monotonic(&run);
}

fn mig_gpu(power: f64, sm3: f64, sm1: f64) -> GpuSample {
    let instance = |uuid: &str, gi: u32, profile: &str, slices: u32, sm: f64| MigSample {
        uuid: uuid.into(),
        gpu_instance_id: gi,
        profile: profile.into(),
        slices,
        gpm: Some(GpmActivity {
            sm_activity: sm,
            ..Default::default()
        }),
        ..Default::default()
    };
    GpuSample {
        mig_enabled: Some(true),
        mig_slices_total: Some(7),
        utilization: None,
        mig_instances: vec![
            instance(M3, 2, "3g.40gb", 3, sm3),
            instance(M1, 9, "1g.10gb", 1, sm1),
        ],
        ..gpu(G0, 0, 0.0, power, &[])
    }
}

#[test]
fn a_mig_gpu_charges_instances_by_slices_and_leaves_unpartitioned_slices_to_nobody() {
    let mut h3 = holder("big", &[M3]);
    h3.devices[0].resource_name = "nvidia.com/mig-3g.40gb".into();
    let mut h1 = holder("small", &[M1]);
    h1.devices[0].resource_name = "nvidia.com/mig-1g.10gb".into();
    let n = node(vec![h3, h1], &[]);
    let mut run = Run::new(&n, 1);
    for _ in 0..40 {
        run.second(vec![mig_gpu(70.0, 0.0, 0.0)], &[]);
    }
    let s = run.snapshots.last().cloned().unwrap();
    assert_eq!(s.gpus[0].energy.floor_watts, Some(70.0));
    let (big0, small0) = (
        row(&s, 0, "big").energy.total(),
        row(&s, 0, "small").energy.total(),
    );
    let unallocated0 = s.gpus[0].energy.remainder[&Remainder::Unallocated];
    for _ in 0..20 {
        run.second(vec![mig_gpu(270.0, 0.5, 0.0)], &[]);
    }
    let s = run.snapshots.last().cloned().unwrap();
    let big = row(&s, 0, "big").energy.total() - big0;
    let small = row(&s, 0, "small").energy.total() - small0;
    let unallocated = s.gpus[0].energy.remainder[&Remainder::Unallocated] - unallocated0;
    assert!((small - 10.0 * 20.0).abs() < 1e-6, "small {small}");
    assert!(
        (unallocated - 30.0 * 20.0).abs() < 1e-6,
        "3 slices unpartitioned"
    );
    // big's instance is busy but none of its processes is seen: its work is withheld (the
    // instance's split says so), its floor its own.
    assert!((big - 30.0 * 20.0).abs() < 1e-6, "big {big}");
    assert_conserved(&run);
    assert_monotonic(&run);
}

#[test]
fn hostile_readings_neither_break_the_account_nor_run_a_counter_back() {
    let n = node(
        vec![
            holder("a", &[&format!("{G0}::0")]),
            holder("b", &[&format!("{G0}::1")]),
        ],
        &[("a", 10)],
    );
    let mut run = Run::new(&n, 1);
    let powers = [80.0, f64::NAN, -5.0, f64::INFINITY, 300.0, 1e12, 0.0, 250.0];
    for i in 0..60 {
        let w = powers[i % powers.len()];
        run.second(vec![gpu(G0, 0, 0.5, w, &[(10, 0.5)])], &[(10, 0.9)]);
    }
    // A counter that went back (a driver reload) restarts the account; counters never go back.
    run.energy[0] = (10.0, 10.0);
    for _ in 0..20 {
        run.second(vec![gpu(G0, 0, 0.5, 300.0, &[(10, 0.5)])], &[(10, 0.9)]);
    }
    assert_monotonic(&run);
    for s in &run.snapshots {
        let e = &s.gpus[0].energy;
        assert!(
            e.remainder.values().all(|v| v.is_finite() && *v >= 0.0),
            "{e:?}"
        );
        for c in &s.gpus[0].containers {
            assert!(c.energy.total().is_finite() && c.energy.total() >= 0.0);
        }
    }
}

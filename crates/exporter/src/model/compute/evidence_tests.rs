//! The wider rules and the disputes, each against the per-process split it revisits.

use std::collections::HashMap;

use super::*;
use crate::model::compute::{split, ActivityInputs, ProbeReading, ProbeTimeline};
use crate::model::ProcessSample;

use crate::model::testkit::compute_process as proc;

fn pod(ns: &str, pod: &str, container: &str) -> PodRef {
    PodRef {
        namespace: ns.into(),
        pod: pod.into(),
        container: container.into(),
        ..Default::default()
    }
}

fn reading(busy: f64) -> ProbeReading {
    ProbeReading {
        busy_ratio: Some(busy),
        busy_seconds: 10.0,
        kernels: 100,
        ..Default::default()
    }
}

struct Case {
    procs: Vec<ProcessSample>,
    owners: Vec<(u32, PodRef)>,
    act: ActivityInputs,
    device: Option<f64>,
    mps: bool,
}

impl Case {
    fn new(device: f64) -> Self {
        Case {
            procs: Vec::new(),
            owners: Vec::new(),
            act: ActivityInputs::default(),
            device: Some(device),
            mps: false,
        }
    }
    /// A process that runs (CPU active), owned by `owner`, with NVML's booking `sm`.
    fn with(mut self, pid: u32, sm: Option<f64>, owner: PodRef) -> Self {
        self.procs.push(proc(pid, sm));
        self.owners.push((pid, owner));
        self.act.cpu_cores.insert(pid, 0.5);
        self
    }
    fn probe(mut self, pid: u32, r: ProbeReading) -> Self {
        self.act.probe.insert(pid, r);
        self
    }
    fn run(&self) -> DeviceSplit {
        let refs: Vec<&ProcessSample> = self.procs.iter().collect();
        let d = DeviceCompute {
            processes: &refs,
            device_activity: self.device,
            mps: self.mps,
            mig_instance: false,
            activity: &self.act,
            now: 0.0,
            idle_since: None,
            recent_activity: &[],
        };
        let mut s = split(&d);
        let owners: HashMap<u32, &PodRef> = self.owners.iter().map(|(p, o)| (*p, o)).collect();
        review(&mut s, &d, &owners);
        s
    }
}

#[test]
fn two_active_processes_of_one_container_give_the_container_the_devices_reading() {
    let c = pod("ml", "triton-0", "server");
    let s = Case::new(0.72)
        .with(1, Some(0.6), c.clone())
        .with(2, Some(0.1), c.clone())
        .run();
    assert_eq!(s.method, SplitMethod::SoleActiveContainer);
    let w = s.wide.as_ref().unwrap();
    assert!(w.is_container(&c));
    assert_eq!(w.share, 0.72);
    // The processes' own shares stay withheld: NVML cannot split them.
    assert_eq!(s.share_of(1).share, None);
    assert_eq!(s.share_of(2).share, None);
}

#[test]
fn two_containers_of_one_pod_give_the_pod_the_reading_and_no_container_one() {
    let s = Case::new(0.5)
        .with(1, None, pod("ml", "ray-0", "actor"))
        .with(2, None, pod("ml", "ray-0", "driver"))
        .run();
    assert_eq!(s.method, SplitMethod::SoleActivePod);
    let w = s.wide.unwrap();
    assert_eq!((w.container, w.share), (None, 0.5));
}

#[test]
fn two_pods_or_an_unowned_candidate_stay_withheld() {
    let s = Case::new(0.5)
        .with(1, None, pod("a", "p", "c"))
        .with(2, None, pod("b", "p", "c"))
        .run();
    assert_eq!(s.method, SplitMethod::Withheld);
    let mut case = Case::new(0.5).with(1, None, pod("a", "p", "c"));
    case.procs.push(proc(2, None));
    case.act.cpu_cores.insert(2, 0.5);
    assert_eq!(case.run().method, SplitMethod::Withheld);
}

#[test]
fn the_one_unprobed_container_gets_the_difference() {
    let s = Case::new(0.8)
        .with(1, None, pod("a", "p", "c"))
        .with(2, None, pod("b", "q", "c"))
        .probe(2, reading(0.3))
        .run();
    assert_eq!(s.method, SplitMethod::ByDifference);
    let w = s.wide.as_ref().unwrap();
    assert!(w.is_container(&pod("a", "p", "c")));
    assert!((w.share - 0.5).abs() < 1e-9);
    assert!(s.why.contains("lower bound"), "{}", s.why);
    assert_eq!(s.share_of(2).share, Some(0.3));
}

#[test]
fn a_difference_too_small_to_tell_is_withheld_never_zero() {
    let s = Case::new(0.8)
        .with(1, None, pod("a", "p", "c"))
        .with(2, None, pod("b", "q", "c"))
        .probe(2, reading(0.8))
        .run();
    assert_eq!(s.method, SplitMethod::Withheld);
    assert!(s.wide.is_none());
}

#[test]
fn by_difference_uses_the_probed_tenants_solo_parts_from_their_timeline() {
    // The probed tenant's spans cover 0.8 (its kernels wait out the other's slices); its
    // kernels' solo durations explain 0.3.
    let line = ProbeTimeline {
        covered: vec![0.8; 200],
        solo: vec![0.3; 200],
        traced: vec![true; 200],
        floor: Vec::new(),
    };
    let mut case = Case::new(0.8)
        .with(1, None, pod("a", "p", "c"))
        .with(2, None, pod("b", "q", "c"))
        .probe(2, reading(0.8));
    case.act.probe_timelines.insert(2, line);
    let s = case.run();
    assert_eq!(s.method, SplitMethod::ByDifference);
    assert!((s.wide.as_ref().unwrap().share - 0.5).abs() < 1e-9);
    assert!((s.share_of(2).share.unwrap() - 0.3).abs() < 1e-9);
}

#[test]
fn a_probed_tenant_claiming_nothing_disputes_the_difference() {
    // Under-reporting to zero would move all its time onto the unprobed co-tenant.
    let s = Case::new(0.8)
        .with(1, None, pod("a", "p", "c"))
        .with(2, None, pod("b", "q", "c"))
        .probe(2, reading(0.0))
        .run();
    assert_eq!(s.method, SplitMethod::Disputed);
    assert_eq!(s.disputed, vec![DisputeReason::ClaimsNothing]);
    assert!(s.wide.is_none());
    assert_eq!(s.share_of(1).share, None);
    assert_eq!(s.share_of(2).share, None);
}

#[test]
fn nvml_booking_a_process_that_claims_nothing_disputes_the_probe_split() {
    let s = Case::new(0.8)
        .with(1, Some(0.7), pod("a", "p", "c"))
        .with(2, Some(0.1), pod("b", "q", "c"))
        .probe(1, reading(0.0))
        .probe(2, reading(0.8))
        .run();
    assert_eq!(s.method, SplitMethod::Disputed);
    assert!(
        s.disputed.contains(&DisputeReason::NvmlBooked),
        "{:?}",
        s.disputed
    );
    assert_eq!(s.share_of(2).share, None, "the co-tenant is not charged");
}

#[test]
fn a_light_tenant_split_below_a_per_cent_is_weighed_by_what_its_probe_ran() {
    // Seen on the H100 corpus: an honest sentence-embedding tenant's spans 0.012 beside a
    // DDP rank's; the timeline split gave it 0.004 while NVML booked it 0.05 (NVML books
    // microsecond kernels many times over). Its probe claimed kernels: not `nvml-booked`.
    // Tenant 1's one millisecond is shared with tenant 2's kernels, which explain most of it.
    let light = ProbeTimeline {
        covered: (0..100).map(|k| if k < 10 { 0.9 } else { 0.0 }).collect(),
        solo: (0..100).map(|k| if k < 10 { 0.1 } else { 0.0 }).collect(),
        traced: vec![true; 100],
        floor: Vec::new(),
    };
    let busy = ProbeTimeline {
        covered: (0..100).map(|k| if k < 10 { 0.9 } else { 0.0 }).collect(),
        solo: (0..100).map(|k| if k < 10 { 0.8 } else { 0.0 }).collect(),
        traced: vec![true; 100],
        floor: Vec::new(),
    };
    let mut c = Case::new(0.1)
        .with(1, Some(0.05), pod("a", "p", "c"))
        .with(2, Some(0.08), pod("b", "q", "c"))
        .probe(1, reading(0.012))
        .probe(2, reading(0.08));
    c.act.probe_timelines = HashMap::from([(1, light), (2, busy)]);
    let s = c.run();
    assert!(s.from_timelines, "{}", s.why);
    assert!(s.share_of(1).share.is_some_and(|v| v < 0.01), "{s:?}");
    assert!(!s.disputed.contains(&DisputeReason::NvmlBooked), "{s:?}");
    // Spans under a per cent and no kernel against the same booking: a probe hiding what NVML
    // saw.
    let c = Case::new(0.1)
        .with(1, Some(0.05), pod("a", "p", "c"))
        .with(2, Some(0.08), pod("b", "q", "c"))
        .probe(1, reading(0.004))
        .probe(2, reading(0.08));
    assert!(c.run().disputed.contains(&DisputeReason::NvmlBooked));
    // Also seen there: an honest embedding tenant's 2,088 kernels a second, spans 0.0078,
    // booked 0.06 by NVML: its over-read, not a contradiction. Ten times the booking is one.
    let busy_micro = |booked: f64| {
        let mut c = Case::new(0.1)
            .with(1, Some(booked), pod("a", "p", "c"))
            .with(2, Some(0.08), pod("b", "q", "c"))
            .probe(
                1,
                ProbeReading {
                    window_kernels: Some(10_440),
                    ..reading(0.0078)
                },
            )
            .probe(2, reading(0.08));
        c.act.window_seconds = 5.0;
        c.run().disputed.contains(&DisputeReason::NvmlBooked)
    };
    assert!(!busy_micro(0.06));
    assert!(busy_micro(0.6));
}

#[test]
fn an_over_claiming_lone_probe_and_a_claim_without_cpu_are_disputed() {
    // Two tenants with timelines whose split adds up past what the device measured.
    let full = ProbeTimeline {
        covered: vec![1.0; 100],
        solo: vec![1.0; 100],
        traced: vec![true; 100],
        floor: Vec::new(),
    };
    let none = ProbeTimeline {
        covered: vec![0.0; 100],
        solo: vec![0.0; 100],
        traced: vec![true; 100],
        floor: Vec::new(),
    };
    let mut case = Case::new(0.3)
        .with(1, None, pod("a", "p", "c"))
        .with(2, None, pod("b", "q", "c"))
        .probe(1, reading(1.0))
        .probe(2, reading(0.05));
    case.act.probe_timelines = HashMap::from([(1, full), (2, none)]);
    let s = case.run();
    assert_eq!(s.method, SplitMethod::Disputed);
    assert!(
        s.disputed.contains(&DisputeReason::OverClaimed),
        "{:?}",
        s.disputed
    );

    let mut case = Case::new(0.6)
        .with(1, None, pod("a", "p", "c"))
        .with(2, None, pod("b", "q", "c"))
        .probe(1, reading(0.4))
        .probe(2, reading(0.3));
    case.act.cpu_cores.insert(1, 0.0);
    let s = case.run();
    assert_eq!(s.disputed, vec![DisputeReason::ClaimWithoutCpu]);
}

#[test]
fn claims_far_short_of_the_devices_busy_time_are_disputed() {
    let s = Case::new(0.9)
        .with(1, None, pod("a", "p", "c"))
        .with(2, None, pod("b", "q", "c"))
        .probe(1, reading(0.2))
        .probe(2, reading(0.1))
        .run();
    assert_eq!(s.disputed, vec![DisputeReason::UnderClaimed]);
    // An honest shortfall (context switches) stays within the tolerance.
    let s = Case::new(0.9)
        .with(1, None, pod("a", "p", "c"))
        .with(2, None, pod("b", "q", "c"))
        .probe(1, reading(0.45))
        .probe(2, reading(0.35))
        .run();
    assert_eq!(s.method, SplitMethod::Probe);
}

#[test]
fn a_hidden_tenant_shows_as_the_others_kernels_stretched_while_alone() {
    // Tenant 2 runs 50 % of every millisecond but its probe reports no kernels; tenant 1's
    // kernels, waiting out those slices, cover 0.8 of each millisecond for 0.3 of solo work.
    let honest = ProbeTimeline {
        covered: vec![0.8; 200],
        solo: vec![0.3; 200],
        traced: vec![true; 200],
        floor: Vec::new(),
    };
    let liar = ProbeTimeline {
        covered: vec![0.0; 200],
        solo: vec![0.0; 200],
        traced: vec![true; 200],
        floor: Vec::new(),
    };
    let mut case = Case::new(0.8)
        .with(1, None, pod("a", "p", "c"))
        .with(2, None, pod("b", "q", "c"))
        .probe(1, reading(0.8))
        .probe(2, reading(0.0));
    case.act.probe_timelines = HashMap::from([(1, honest.clone()), (2, liar.clone())]);
    let s = case.run();
    assert_eq!(s.method, SplitMethod::Disputed);
    assert_eq!(s.disputed, vec![DisputeReason::StretchedAlone]);

    // The liar says outright it saw no kernel: alone, that would make it idle (its co-tenant's
    // 0.8 explains the device). The stretch still gives it away: disputed, and not idle.
    let saw_nothing = ProbeReading {
        window_kernels: Some(0),
        ..reading(0.0)
    };
    let with_count = |pid_1: ProbeReading, line_1: ProbeTimeline| {
        let mut c = Case::new(0.8)
            .with(1, None, pod("a", "p", "c"))
            .with(2, None, pod("b", "q", "c"))
            .probe(1, pid_1)
            .probe(2, saw_nothing);
        c.act.probe_timelines = HashMap::from([(1, line_1), (2, liar.clone())]);
        c.run()
    };
    let busy = ProbeReading {
        window_kernels: Some(500),
        ..reading(0.8)
    };
    let s = with_count(busy, honest);
    assert_eq!(s.method, SplitMethod::Disputed, "{}", s.why);
    assert!(s.quiet.is_empty() && s.probe_idle.is_empty());
    assert_eq!(
        s.share_of(2).share,
        None,
        "a disputed tenant is never read idle"
    );
    assert_eq!(s.share_of(1).share, None);

    // A memory holder beside a tenant whose kernels run at their solo pace: idle, as measured.
    let unstretched = ProbeTimeline {
        covered: vec![0.8; 200],
        solo: vec![0.78; 200],
        traced: vec![true; 200],
        floor: Vec::new(),
    };
    let s = with_count(busy, unstretched);
    assert_eq!(s.probe_idle, vec![2], "{}", s.why);
    assert_eq!(s.share_of(2).share, Some(0.0));
    assert!(s.share_of(1).share.is_some_and(|v| v > 0.7), "{}", s.why);
}

#[test]
fn a_silent_probe_or_a_wrong_clock_disputes_the_split() {
    let silent = ProbeReading {
        silent: true,
        busy_ratio: None,
        ..reading(0.0)
    };
    let s = Case::new(0.8)
        .with(1, None, pod("a", "p", "c"))
        .with(2, None, pod("b", "q", "c"))
        .probe(1, silent)
        .probe(2, reading(0.4))
        .run();
    assert_eq!(s.method, SplitMethod::Disputed);
    assert_eq!(s.disputed, vec![DisputeReason::ProbeSilent]);

    let clocked = |busy, clock| ProbeReading {
        clock_seconds: Some(clock),
        ..reading(busy)
    };
    let s = Case::new(0.8)
        .with(1, None, pod("a", "p", "c"))
        .with(2, None, pod("b", "q", "c"))
        .probe(1, clocked(0.5, 100.0))
        .probe(2, clocked(0.3, 100.1))
        .run();
    assert_eq!(s.method, SplitMethod::Probe);
    let s = Case::new(0.8)
        .with(1, None, pod("a", "p", "c"))
        .with(2, None, pod("b", "q", "c"))
        .probe(1, clocked(0.5, 100.0))
        .probe(2, clocked(0.3, 103.0))
        .run();
    assert_eq!(s.disputed, vec![DisputeReason::Clock]);
}

#[test]
fn a_lying_probe_in_a_container_alone_on_its_device_harms_only_itself() {
    let c = pod("ml", "p", "c");
    let s = Case::new(0.8)
        .with(1, Some(0.7), c.clone())
        .with(2, Some(0.1), c.clone())
        .probe(1, reading(0.0))
        .probe(2, reading(0.2))
        .run();
    assert_eq!(s.method, SplitMethod::SoleActiveContainer);
    assert_eq!(s.wide.unwrap().share, 0.8);
    assert!(!s.disputed.is_empty());
}

#[test]
fn a_mig_instance_run_by_one_containers_processes_is_that_containers() {
    let c = pod("ml", "p", "c");
    let case = Case::new(0.4)
        .with(1, None, c.clone())
        .with(2, None, c.clone());
    let refs: Vec<&ProcessSample> = case.procs.iter().collect();
    let d = DeviceCompute {
        processes: &refs,
        device_activity: Some(0.4),
        mps: false,
        mig_instance: true,
        activity: &case.act,
        now: 0.0,
        idle_since: None,
        recent_activity: &[],
    };
    let mut s = split(&d);
    assert_eq!(s.method, SplitMethod::Withheld);
    let owners: HashMap<u32, &PodRef> = case.owners.iter().map(|(p, o)| (*p, o)).collect();
    review(&mut s, &d, &owners);
    assert_eq!(s.method, SplitMethod::SoleActiveContainer);
    assert_eq!(s.wide.unwrap().share, 0.4, "the instance's GPM activity");
}

/// `n` milliseconds, each covered `c` of the way, solo `solo`.
fn line(n: usize, c: f64, solo: f64) -> ProbeTimeline {
    ProbeTimeline {
        covered: vec![c; n],
        solo: vec![solo; n],
        traced: vec![true; n],
        floor: Vec::new(),
    }
}

#[test]
fn a_kernel_that_outlasts_time_slices_gets_its_solo_figure_and_counts_in_the_claims() {
    // Three short-kernel tenants at 0.1 and a long kernel around them: the device reads 0.98.
    // The long tenant's spans hold the others' slices; what its kernels' solo durations
    // explain is its figure (withheld, 18 of 25 heavy tenants on the H200 corpus would read
    // nothing), and its claim keeps the others' 0.3 from looking like hiding time.
    let mut case = Case::new(0.98);
    for pid in 1..=4 {
        case = case.with(pid, None, pod("ns", &format!("p{pid}"), "c"));
        let c = if pid == 4 { 1.0 } else { 0.1 };
        let solo = if pid == 4 { 0.5 } else { 0.1 };
        case = case.probe(pid, reading(c));
        case.act.probe_timelines.insert(pid, line(200, c, solo));
    }
    let s = case.run();
    assert_eq!(s.method, SplitMethod::Probe, "{}", s.why);
    assert!(s.disputed.is_empty(), "{:?}", s.disputed);
    let long = s.share_of(4);
    assert!(
        long.share.is_some_and(|v| (v - 0.5).abs() < 1e-9),
        "{long:?}"
    );
    // Its bounds: its floor, and its covered time less what the others ran beside it.
    assert!(
        long.lower.is_some_and(|v| (v - 0.5).abs() < 1e-9),
        "{long:?}"
    );
    assert!(
        long.upper.is_some_and(|v| (v - 0.7).abs() < 1e-9),
        "{long:?}"
    );
    assert!(s.outlasting.get(&4).is_some_and(|o| !o.withheld));
    assert!(s.why.contains("solo durations explain"), "{}", s.why);
    for pid in 1..=3 {
        assert!(s
            .share_of(pid)
            .share
            .is_some_and(|v| (v - 0.1).abs() < 1e-9));
    }
    // Two such processes of one container: each its solo part.
    let c = pod("ml", "train-0", "worker");
    let mut case = Case::new(0.9)
        .with(1, None, c.clone())
        .with(2, None, c.clone())
        .probe(1, reading(1.0))
        .probe(2, reading(1.0));
    case.act.probe_timelines =
        HashMap::from([(1, line(200, 1.0, 0.45)), (2, line(200, 1.0, 0.45))]);
    let s = case.run();
    assert_eq!(s.method, SplitMethod::Probe, "{}", s.why);
    for pid in 1..=2 {
        assert!(s
            .share_of(pid)
            .share
            .is_some_and(|v| (v - 0.45).abs() < 1e-9));
    }
}

#[test]
fn a_probe_speaking_totals_only_beside_timelines_is_a_downgrade_and_disputed() {
    // Two MPS clients: one runs a current probe, the other claims a quarter of its time over
    // the older wire (no timeline). The sums tolerate that lie (0.05 of the device hidden).
    let current = ProbeReading {
        window_kernels: Some(5000),
        ..reading(0.30)
    };
    let old_wire = ProbeReading {
        window_kernels: Some(40),
        totals_only: true,
        ..reading(0.02)
    };
    let mut c = Case::new(0.37)
        .with(1, None, pod("a", "a", "a"))
        .with(2, None, pod("b", "b", "b"))
        .probe(1, current)
        .probe(2, old_wire);
    c.mps = true;
    let s = c.run();
    assert_eq!(s.method, SplitMethod::Disputed, "{}", s.why);
    assert_eq!(s.disputed, vec![DisputeReason::TotalsOnly]);

    // The same old probe that saw no kernel claims nothing: no downgrade to speak of.
    let idle = ProbeReading {
        window_kernels: Some(0),
        ..old_wire
    };
    c.act.probe.insert(
        2,
        ProbeReading {
            busy_ratio: Some(0.0),
            ..idle
        },
    );
    let s = c.run();
    assert!(
        !s.disputed.contains(&DisputeReason::TotalsOnly),
        "{:?}",
        s.disputed
    );

    // Every probe on the device speaks the older wire: nothing to downgrade from.
    c.act.probe.insert(
        1,
        ProbeReading {
            totals_only: true,
            ..current
        },
    );
    c.act.probe.insert(2, old_wire);
    let s = c.run();
    assert!(
        !s.disputed.contains(&DisputeReason::TotalsOnly),
        "{:?}",
        s.disputed
    );
}

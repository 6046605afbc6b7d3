use super::*;

const WEEK: f64 = 7.0 * 86_400.0;
const H100: &str = "NVIDIA H100 80GB HBM3";

fn policy() -> Policy {
    Policy {
        window_s: WEEK,
        price_per_gpu_hour: Some(2.0),
    }
}

/// A week-long exclusive workload: `replicas` whole GPUs.
fn profile(replicas: f64, mem_gib: f64, p50: f64, p95: f64) -> Profile {
    Profile {
        key: WorkloadKey {
            namespace: "ns".into(),
            kind: "Deployment".into(),
            name: "w".into(),
            sharing_mode: "exclusive".into(),
            ..WorkloadKey::default()
        },
        model: Some(H100.into()),
        gpus_held: replicas,
        replicas,
        mem_peak_bytes: Some(mem_gib * GIB),
        mem_p95_bytes: Some(mem_gib * GIB),
        sm_p50: Some(p50),
        sm_p95: Some(p95),
        compute_coverage: 1.0,
        billed_gpus: 0.0,
        accountable_gpus: 0.0,
        history_s: WEEK,
        ..Profile::default()
    }
}

fn run(p: Profile) -> Advice {
    advise(p, &policy(), WEEK)
}

#[test]
fn idle_holder_is_released_with_its_gpus_and_money() {
    let mut p = profile(1.0, 30.0, 0.0, 0.0);
    p.idle_gpus = 1.0;
    let a = run(p);
    assert_eq!(a.action, Action::Release);
    assert!((a.gpus_saved - 1.0).abs() < 1e-9);
    assert!((a.money_saved_per_month.unwrap() - 2.0 * 730.0).abs() < 1e-6);
    assert_eq!(a.confidence, Some(Confidence::High));
}

#[test]
fn idleness_that_could_not_be_decided_is_never_released() {
    let mut p = profile(1.0, 30.0, 0.0, 0.0);
    p.idle_gpus = 0.96;
    p.undecided_gpus = 0.04;
    assert_eq!(run(p.clone()).action, Action::Release);
    p.idle_gpus = 0.94;
    assert_ne!(run(p.clone()).action, Action::Release);
    p.idle_gpus = 0.95;
    p.undecided_gpus = 0.3;
    assert_ne!(run(p).action, Action::Release);
}

#[test]
fn light_inference_gets_the_smallest_mig_profile() {
    let a = run(profile(3.0, 6.3, 0.065, 0.08));
    assert_eq!(
        a.action,
        Action::Mig {
            mig_profile: "1g.10gb"
        }
    );
    assert!(
        (a.gpus_saved - (3.0 - 3.0 / 7.0)).abs() < 1e-9,
        "{}",
        a.gpus_saved
    );
}

#[test]
fn mig_fit_needs_headroom_on_memory_and_sms() {
    // 8.2 GiB * 1.2 = 9.84 > 9.75: one size up in memory (1g.20gb, 4 per GPU).
    assert_eq!(
        run(profile(1.0, 8.2, 0.05, 0.08)).action,
        Action::Mig {
            mig_profile: "1g.20gb"
        }
    );
    // p95 11 % * 1.2 = 13.2 % > 16/132 SMs (12.1 %): 26 SMs of the 1g.20gb cover it.
    assert_eq!(
        run(profile(1.0, 6.0, 0.10, 0.11)).action,
        Action::Mig {
            mig_profile: "1g.20gb"
        }
    );
}

#[test]
fn heavy_training_keeps_its_gpus() {
    let a = run(profile(2.0, 70.0, 0.92, 0.95));
    assert_eq!(a.action, Action::Keep);
    assert_eq!(a.gpus_saved, 0.0);
    assert!(a.reason.contains("38 %"), "{}", a.reason);
}

#[test]
fn bursty_mid_size_moves_to_mps_with_limits() {
    let a = run(profile(2.0, 20.0, 0.12, 0.45));
    assert_eq!(
        a.action,
        Action::Mps {
            clients: 3,
            active_thread_percentage: 55,
            pinned_memory_limit_gib: 24
        }
    );
    assert!((a.gpus_saved - (2.0 - 2.0 / 3.0)).abs() < 1e-9);
}

#[test]
fn no_compute_figure_declines_compute_based_packing() {
    let mut p = profile(1.0, 5.0, 0.0, 0.0);
    p.sm_p50 = None;
    p.sm_p95 = None;
    p.compute_coverage = 0.0;
    p.undecided_gpus = 1.0;
    let a = run(p.clone());
    assert_eq!(a.action, Action::Decline);
    assert_eq!(a.gpus_saved, 0.0);
    assert!(a.reason.contains("compute figure"), "{}", a.reason);
    // A partial figure is not enough either.
    p.sm_p50 = Some(0.05);
    p.sm_p95 = Some(0.05);
    p.compute_coverage = 0.8;
    assert_eq!(run(p).action, Action::Decline);
}

#[test]
fn short_history_declines() {
    let mut p = profile(1.0, 4.0, 0.05, 0.05);
    p.history_s = 12.0 * 3600.0;
    let a = run(p);
    assert_eq!(a.action, Action::Decline);
    assert!(a.reason.contains("12 h"), "{}", a.reason);
}

#[test]
fn unknown_gpu_model_gets_no_sizing() {
    let mut p = profile(1.0, 4.0, 0.05, 0.05);
    p.model = Some("NVIDIA L4".into());
    assert_eq!(run(p).action, Action::Decline);
}

#[test]
fn ties_prefer_mig_and_light_work_is_offered_time_slicing() {
    // 30 GiB * 1.2 = 36 GiB needs a 3g.40gb (half a GPU); 2-way time-slicing costs the same
    // and MPS by p95 also 2: MIG wins the tie (isolation).
    let a = run(profile(1.0, 30.0, 0.05, 0.06));
    assert_eq!(
        a.action,
        Action::Mig {
            mig_profile: "3g.40gb"
        }
    );
    // On a model without MIG sizes but with memory known, time-slicing is never better than
    // MPS (same packing limits, MPS has more room): the ordering holds.
    let c = candidates(&gpus::H100_80GB, 15.0 * GIB, 0.05, 0.06);
    assert!(c
        .iter()
        .any(|x| matches!(x.0, Action::TimeSlicing { replicas: 4 })));
}

#[test]
fn already_right_sized_mig_is_kept() {
    let mut p = profile(1.0, 6.0, 0.05, 0.08);
    p.key.sharing_mode = "mig".into();
    p.gpus_held = 1.0 / 7.0;
    let a = run(p);
    assert_eq!(a.action, Action::Keep);
    assert_eq!(a.gpus_saved, 0.0);
}

#[test]
fn a_workload_present_half_the_time_saves_half() {
    let mut p = profile(1.0, 30.0, 0.0, 0.0);
    p.idle_gpus = 1.0;
    p.history_s = WEEK / 2.0;
    let a = advise(p, &policy(), WEEK);
    assert!((a.gpus_saved - 0.5).abs() < 1e-9);
    assert_eq!(a.confidence, Some(Confidence::Medium));
}

#[test]
fn ranking_puts_savings_first_and_declines_last() {
    let mut idle = profile(1.0, 30.0, 0.0, 0.0);
    idle.idle_gpus = 1.0;
    idle.key.name = "idle".into();
    let mut light = profile(3.0, 6.0, 0.05, 0.08);
    light.key.name = "light".into();
    let mut none = profile(1.0, 5.0, 0.0, 0.0);
    none.compute_coverage = 0.0;
    none.key.name = "none".into();
    let heavy = profile(2.0, 70.0, 0.9, 0.95);
    let names: Vec<_> = advise_all(vec![none, heavy, idle, light], &policy())
        .into_iter()
        .map(|a| a.profile.key.name)
        .collect();
    assert_eq!(names, ["light", "idle", "w", "none"]);
}

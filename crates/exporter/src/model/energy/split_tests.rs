use super::*;

fn key(pod: &str) -> EnergyKey {
    EnergyKey::new(
        std::sync::Arc::new(crate::model::holding::PodRef {
            namespace: "ml".into(),
            pod: pod.into(),
            container: "main".into(),
            ..Default::default()
        }),
        None,
    )
}

fn tenant(pod: &str, state: State, hold: f64, share: Option<f64>) -> Tenant {
    Tenant {
        key: key(pod),
        state,
        hold,
        share,
        bounds: None,
    }
}

fn gpu(power: f64, floor: Option<f64>, device: DeviceUse) -> GpuUse {
    GpuUse {
        power_watts: power,
        floor_watts: floor,
        seconds: 2.0,
        mig: false,
        devices: vec![device],
    }
}

fn device(activity: f64, tenants: Vec<Tenant>) -> DeviceUse {
    DeviceUse {
        floor_share: 1.0,
        activity: Some(activity),
        idle: activity < IDLE_SHARE,
        tenants,
        withheld: None,
    }
}

fn to(c: &Charges, pod: &str, state: State) -> f64 {
    c.split
        .get(&Recipient::Container(key(pod), state))
        .copied()
        .unwrap_or(0.0)
}

fn nobody_of(c: &Charges, r: Remainder) -> f64 {
    c.split.get(&Recipient::Nobody(r)).copied().unwrap_or(0.0)
}

fn close(a: f64, b: f64) -> bool {
    (a - b).abs() < 1e-9
}

#[test]
fn a_gpu_held_and_used_by_one_container_is_all_its_own_with_or_without_a_floor() {
    for floor in [Some(80.0), None] {
        let g = gpu(
            500.0,
            floor,
            device(0.9, vec![tenant("a", State::NotIdle, 1.0, Some(0.9))]),
        );
        let (c, _) = split(&g);
        assert!(
            close(to(&c, "a", State::NotIdle), 1000.0),
            "{floor:?}: {c:?}"
        );
        assert!(close(c.total(), 1000.0));
    }
    // The dynamic part needs the floor.
    let g = gpu(
        500.0,
        Some(80.0),
        device(0.9, vec![tenant("a", State::NotIdle, 1.0, Some(0.9))]),
    );
    assert!(close(split(&g).0.dynamic[&key("a")], 840.0));
}

#[test]
fn an_idle_holder_pays_its_part_of_the_floor_and_nothing_of_its_busy_co_tenant() {
    let g = gpu(
        400.0,
        Some(80.0),
        device(
            0.6,
            vec![
                tenant("busy", State::NotIdle, 1.0, Some(0.6)),
                tenant("idle", State::Idle, 1.0, Some(0.0)),
            ],
        ),
    );
    let (c, _) = split(&g);
    assert!(close(to(&c, "idle", State::Idle), 80.0), "{c:?}");
    assert!(close(to(&c, "busy", State::NotIdle), 80.0 + 640.0));
    assert!(!c.dynamic.contains_key(&key("idle")));
    assert!(close(c.total(), 800.0));
}

#[test]
fn without_a_floor_a_shared_gpu_in_use_is_charged_to_nobody() {
    let g = gpu(
        400.0,
        None,
        device(
            0.6,
            vec![
                tenant("busy", State::NotIdle, 1.0, Some(0.6)),
                tenant("idle", State::Idle, 1.0, Some(0.0)),
            ],
        ),
    );
    let (c, why) = split(&g);
    assert!(
        close(nobody_of(&c, Remainder::FloorUnknown), 800.0),
        "{c:?}"
    );
    assert_eq!(c.split.len(), 1);
    assert!(why.contains("no idle floor"));
}

#[test]
fn an_idle_gpu_s_whole_power_is_its_floor_split_by_holding_floor_or_not() {
    for floor in [Some(70.0), None] {
        let g = gpu(
            82.0,
            floor,
            device(
                0.0,
                vec![
                    tenant("a", State::Idle, 1.0, Some(0.0)),
                    tenant("b", State::Idle, 3.0, Some(0.0)),
                ],
            ),
        );
        let (c, _) = split(&g);
        assert!(close(to(&c, "a", State::Idle), 41.0), "{c:?}");
        assert!(close(to(&c, "b", State::Idle), 123.0));
        assert!(c.dynamic.is_empty());
    }
}

#[test]
fn grants_weigh_the_floor_and_a_non_holder_pays_only_its_work() {
    // HAMi: a holds 30 % of the SMs, b 10 %; c runs on the GPU without an allocation.
    let g = gpu(
        300.0,
        Some(100.0),
        device(
            0.5,
            vec![
                tenant("a", State::NotIdle, 0.3, Some(0.25)),
                tenant("b", State::Idle, 0.1, Some(0.0)),
                tenant("c", State::NotIdle, 0.0, Some(0.25)),
            ],
        ),
    );
    let (c, _) = split(&g);
    assert!(close(to(&c, "a", State::NotIdle), 150.0 + 200.0), "{c:?}");
    assert!(close(to(&c, "b", State::Idle), 50.0));
    assert!(close(to(&c, "c", State::NotIdle), 200.0));
}

#[test]
fn a_withheld_share_withholds_its_energy_with_the_split_s_reason_and_bounds_it() {
    let mut d = device(
        0.8,
        vec![
            tenant("a", State::NotIdle, 1.0, None),
            tenant("b", State::NotIdle, 1.0, None),
        ],
    );
    d.withheld = Some(Remainder::BoundsOnly);
    d.tenants[0].bounds = Some((0.4, 0.9));
    let (c, _) = split(&gpu(400.0, Some(80.0), d));
    assert!(
        close(to(&c, "a", State::NotIdle), 80.0),
        "the floor is still known"
    );
    assert!(close(to(&c, "b", State::NotIdle), 80.0));
    assert!(close(nobody_of(&c, Remainder::BoundsOnly), 640.0));
    assert!(close(c.lower[&key("a")], 0.5 * 640.0));
    assert!(
        close(c.upper[&key("a")], 640.0),
        "an upper bound past the gap is cut"
    );
    assert!(!c.lower.contains_key(&key("b")));
}

#[test]
fn what_the_device_measured_past_the_known_shares_is_unattributed() {
    // A process outside any pod ran the other 0.2 of the device.
    let g = gpu(
        400.0,
        Some(80.0),
        device(0.6, vec![tenant("a", State::NotIdle, 1.0, Some(0.4))]),
    );
    let (c, _) = split(&g);
    let above = 640.0;
    assert!(
        close(to(&c, "a", State::NotIdle), 160.0 + above * 0.4 / 0.6),
        "{c:?}"
    );
    assert!(close(
        nobody_of(&c, Remainder::Unattributed),
        above * 0.2 / 0.6
    ));
}

#[test]
fn nobody_holding_a_gpu_leaves_its_floor_unallocated() {
    let g = gpu(
        300.0,
        Some(100.0),
        device(0.5, vec![tenant("sneaky", State::NotIdle, 0.0, Some(0.5))]),
    );
    let (c, _) = split(&g);
    assert!(close(nobody_of(&c, Remainder::Unallocated), 200.0));
    assert!(close(to(&c, "sneaky", State::NotIdle), 400.0));
}

fn instance(slices: f64, activity: f64, tenants: Vec<Tenant>) -> DeviceUse {
    DeviceUse {
        floor_share: slices / 7.0,
        ..device(activity, tenants)
    }
}

fn mig_key(pod: &str, mig: &str) -> EnergyKey {
    EnergyKey::new(key(pod).pod, Some(mig))
}

#[test]
fn a_mig_gpu_splits_its_floor_by_slices_and_its_work_by_activity_times_slices() {
    let t = |pod: &str, mig: &str, state, share| Tenant {
        key: mig_key(pod, mig),
        ..tenant(pod, state, 1.0, share)
    };
    let g = GpuUse {
        power_watts: 380.0,
        floor_watts: Some(70.0),
        seconds: 1.0,
        mig: true,
        devices: vec![
            // 3g at 0.6 and 2g at 0.3: work weights 1.8 and 0.6.
            instance(3.0, 0.6, vec![t("big", "M3", State::NotIdle, Some(0.6))]),
            instance(2.0, 0.3, vec![t("mid", "M2", State::NotIdle, Some(0.3))]),
            instance(1.0, 0.0, vec![t("nb", "M1", State::Idle, Some(0.0))]),
        ],
    };
    let (c, _) = split(&g);
    let get = |pod: &str, mig: &str, s| {
        c.split
            .get(&Recipient::Container(mig_key(pod, mig), s))
            .copied()
            .unwrap_or(0.0)
    };
    assert!(
        close(get("big", "M3", State::NotIdle), 30.0 + 310.0 * 0.75),
        "{c:?}"
    );
    assert!(close(get("mid", "M2", State::NotIdle), 20.0 + 310.0 * 0.25));
    assert!(close(get("nb", "M1", State::Idle), 10.0));
    // One slice nobody partitioned.
    assert!(close(nobody_of(&c, Remainder::Unallocated), 10.0));
    assert!(close(c.total(), 380.0));
}

#[test]
fn a_mig_instance_without_gpm_withholds_the_work_but_not_the_floor() {
    let mut quiet = instance(4.0, 0.0, vec![tenant("a", State::NotIdle, 1.0, None)]);
    quiet.activity = None;
    quiet.idle = false;
    let g = GpuUse {
        power_watts: 300.0,
        floor_watts: Some(70.0),
        seconds: 1.0,
        mig: true,
        devices: vec![quiet, instance(3.0, 0.5, vec![])],
    };
    let (c, _) = split(&g);
    assert!(close(nobody_of(&c, Remainder::Withheld), 230.0), "{c:?}");
    assert!(close(to(&c, "a", State::NotIdle), 40.0));
    assert!(close(nobody_of(&c, Remainder::Unallocated), 30.0));
}

/// Whatever the case, the split accounts for the sample's whole energy.
#[test]
fn every_split_adds_up_to_power_times_seconds() {
    let shares = [None, Some(0.0), Some(0.3), Some(0.9)];
    let mut cases = 0;
    for floor in [None, Some(0.0), Some(60.0), Some(500.0)] {
        for activity in [0.0, 0.005, 0.4, 1.0] {
            for (sa, sb) in shares
                .iter()
                .flat_map(|a| shares.iter().map(move |b| (*a, *b)))
            {
                for holds in [(0.0, 0.0), (1.0, 0.0), (1.0, 2.0)] {
                    let g = gpu(
                        250.0,
                        floor,
                        DeviceUse {
                            withheld: Some(Remainder::Withheld),
                            ..device(
                                activity,
                                vec![
                                    tenant("a", State::NotIdle, holds.0, sa),
                                    tenant("b", State::NotIdle, holds.1, sb),
                                ],
                            )
                        },
                    );
                    let (c, _) = split(&g);
                    assert!(close(c.total(), 500.0), "{g:?}: {c:?}");
                    assert!(c.split.values().all(|v| *v >= 0.0), "{c:?}");
                    let dynamic: f64 = c.dynamic.values().sum();
                    assert!(dynamic <= 500.0 + 1e-9);
                    cases += 1;
                }
            }
        }
    }
    assert_eq!(cases, 4 * 4 * 16 * 3);
}

#[test]
fn no_power_or_no_time_splits_nothing() {
    let mut g = gpu(0.0, Some(80.0), device(0.5, vec![]));
    assert!(split(&g).0.is_empty());
    g.power_watts = 300.0;
    g.seconds = 0.0;
    assert!(split(&g).0.is_empty());
}

//! Which tenant compute figures the compat surface publishes (measured ones only, so a series'
//! presence does not follow its value), and the scaling that keeps their sum at the device's.

use super::*;

#[test]
fn figures_found_by_elimination_are_not_published_so_presence_does_not_follow_value() {
    // Time-slicing without the probe: one pod runs nothing (tessera knows it reads 0) while
    // the others' shares are withheld. Published, its 0 would exist only while it is idle.
    let idle_now = with(
        SharingMode::TimeSlicing,
        vec![
            holder("a", "busy-1", "c", None, None, 3000),
            holder("b", "busy-2", "c", None, None, 2000),
            holder("c", "between-runs", "c", None, Some(0.0), 0),
        ],
        gpu(0.8, 5012),
    );
    let mut idle_now = idle_now;
    idle_now.gpus[0].processes = vec![process(1, None, None, false), process(2, None, None, false)];
    let t = compat(&idle_now);
    assert_eq!(
        series(&t, "DCGM_FI_PROF_GR_ENGINE_ACTIVE"),
        vec![("".into(), 0.8)],
        "no compute series for any pod, the idle one included"
    );
    // The one active process gets the device by elimination: withheld as well.
    let mut sole = with(
        SharingMode::TimeSlicing,
        vec![
            holder("a", "alone", "c", None, Some(0.8), 3000),
            holder("b", "holds-only", "c", None, Some(0.0), 0),
        ],
        gpu(0.8, 3012),
    );
    sole.gpus[0].processes = vec![process(1, None, None, false)];
    assert_eq!(
        series(&compat(&sole), "DCGM_FI_PROF_GR_ENGINE_ACTIVE"),
        vec![("".into(), 0.8)]
    );
    // Probed, but one holder's figure is withheld (a dispute): nobody's is published.
    let disputed = probed(
        with(
            SharingMode::Mps,
            vec![
                holder("a", "p1", "c", None, Some(0.3), 100),
                holder("a", "p2", "c", None, None, 100),
            ],
            gpu(0.6, 212),
        ),
        &[1, 2],
    );
    assert_eq!(
        series(&compat(&disputed), "DCGM_FI_PROF_GR_ENGINE_ACTIVE"),
        vec![("".into(), 0.6)]
    );
    // Nothing runs at all: no evidence either way, so no pod series (the device reads ~0).
    let empty = with(
        SharingMode::TimeSlicing,
        vec![holder("a", "p1", "c", None, Some(0.0), 0)],
        gpu(0.0, 12),
    );
    assert_eq!(
        series(&compat(&empty), "DCGM_FI_PROF_GR_ENGINE_ACTIVE"),
        vec![("".into(), 0.0)]
    );
}

#[test]
fn probed_mps_clients_above_the_device_are_scaled_to_it() {
    // The MPS server is no candidate and carries no probe; its clients do.
    let mut s = with(
        SharingMode::Mps,
        vec![
            holder("s", "ranker-a", "c", None, Some(0.30), 6200),
            holder("s", "ranker-b", "c", None, Some(0.30), 6200),
            holder("s", "ranker-c", "c", None, Some(0.28), 6200),
        ],
        gpu(0.826, 18_666),
    );
    s.gpus[0].processes = vec![
        process(10, None, Some(ProcessKind::MpsServer), false),
        process(11, None, Some(ProcessKind::MpsClient), true),
        process(12, None, Some(ProcessKind::MpsClient), true),
        process(13, None, Some(ProcessKind::MpsClient), true),
    ];
    let t = compat(&s);
    let gr = series(&t, "DCGM_FI_PROF_GR_ENGINE_ACTIVE");
    assert_eq!(gr.len(), 4, "{gr:?}");
    assert!(total(&gr) <= 0.826 + 1e-9, "{gr:?}");
    assert!((total(&gr) - 0.826).abs() < 1e-9);
    assert_eq!(gr[3], ("".into(), 0.0));
    assert!((gr[0].1 / gr[2].1 - 0.30 / 0.28).abs() < 1e-9);
    let util = series(&t, "DCGM_FI_DEV_GPU_UTIL");
    assert!((total(&util) - 82.6).abs() < 1e-6, "{util:?}");
}

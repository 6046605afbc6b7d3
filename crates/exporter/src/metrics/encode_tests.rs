//! Unit tests of the encoder: caps, counters and hostile label values.

use super::*;
use crate::model::testkit;
use crate::model::{GpuSample, NvmlSample, ProcessSample};

fn snapshot(processes: u32, name: &str) -> Snapshot {
    let nvml = NvmlSample {
        gpus: vec![GpuSample {
            uuid: "GPU-1".into(),
            up: true,
            processes: (0..processes)
                .map(|pid| ProcessSample {
                    pid,
                    name: name.into(),
                    memory_used_bytes: Some(1),
                    ..Default::default()
                })
                .collect(),
            ..Default::default()
        }],
        ..Default::default()
    };
    testkit::snapshot(&nvml)
}

#[test]
fn detail_series_are_capped_and_counted_gpu_series_never() {
    let opts = EncodeOptions {
        max_series: 5,
        detail: crate::metrics::Detail::Full,
        ..Default::default()
    };
    let e = encode(&snapshot(100, "p"), &opts);
    assert!(e.dropped_series > 0);
    assert!(e.text.contains("gpu_up{"));
    assert!(e.text.contains(&format!(
        "tessera_series_dropped{{node=\"n\"}} {}",
        e.dropped_series
    )));
    let processes = e
        .text
        .lines()
        .filter(|l| l.starts_with("gpu_process_"))
        .count();
    assert!(processes <= 5, "{processes}");
}

#[test]
fn hostile_label_values_are_escaped_and_cut() {
    let long = "x".repeat(10_000);
    let e = encode(
        &snapshot(1, &format!("a\"b\\c\nd{long}")),
        &EncodeOptions {
            detail: crate::metrics::Detail::Full,
            ..Default::default()
        },
    );
    let line = e
        .text
        .lines()
        .find(|l| l.starts_with("gpu_process_memory_used_bytes{"))
        .unwrap();
    assert!(line.contains(r#"process="a\"b\\c\nd"#), "{line}");
    assert!(line.len() < 1_000, "cut to the label length cap");
    // Counted per series: every series of the process carries the cut name.
    let process_series = e
        .text
        .lines()
        .filter(|l| l.starts_with("gpu_process_"))
        .count();
    assert!(process_series >= 1);
    assert_eq!(e.truncated_label_values, process_series);
    assert!(e.text.ends_with("# EOF\n"));
}

#[test]
fn container_energy_carries_its_activity_before_the_pod_labels_and_nobody_s_its_reason() {
    use crate::model::energy::{Remainder, State};
    use crate::model::holding::PodRef;
    let mut snap = snapshot(0, "p");
    let g = &mut snap.gpus[0];
    let mut row = testkit::container_use(PodRef {
        namespace: "ml".into(),
        pod: "train-0".into(),
        container: "main".into(),
        workload_kind: "Job".into(),
        workload: "train".into(),
        labels: vec![("label_team".into(), "search".into())],
    });
    row.energy.joules.add(State::Idle, 40.0);
    row.energy.joules.add(State::NotIdle, 360.0);
    row.energy.dynamic_joules = 300.0;
    g.containers.push(row);
    g.energy.remainder.insert(Remainder::Withheld, 12.5);
    g.energy.floor_watts = Some(74.0);
    let full = encode(
        &snap,
        &EncodeOptions {
            detail: crate::metrics::Detail::Full,
            ..Default::default()
        },
    );
    let lines: Vec<&str> = full
        .text
        .lines()
        .filter(|l| l.contains("energy") || l.starts_with("gpu_power_floor"))
        .collect();
    let has = |want: &str| lines.iter().any(|l| l.ends_with(want));
    assert!(
        has(r#"workload="train",activity="not-idle",label_team="search"} 360.0"#),
        "{lines:#?}"
    );
    assert!(has(
        r#"workload="train",activity="idle",label_team="search"} 40.0"#
    ));
    assert!(
        has(r#"workload="train",label_team="search"} 300.0"#),
        "dynamic"
    );
    assert!(lines
        .iter()
        .any(|l| l.starts_with("gpu_energy_unattributed_joules_total{")
            && l.ends_with(r#",reason="withheld"} 12.5"#)));
    assert!(lines
        .iter()
        .any(|l| l.starts_with("gpu_power_floor_watts{") && l.ends_with(" 74.0")));
    // The default leaves the dynamic part and the floor out; the energy and nobody's stay.
    let default = encode(&snap, &EncodeOptions::default()).text;
    assert!(default.contains("gpu_container_energy_joules_total{"));
    assert!(default.contains("gpu_energy_unattributed_joules_total{"));
    assert!(!default.contains("gpu_container_dynamic_energy_joules_total{"));
    assert!(!default.contains("gpu_power_floor_watts{"));
}

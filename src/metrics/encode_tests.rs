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

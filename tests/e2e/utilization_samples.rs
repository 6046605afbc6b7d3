//! Device utilization covers the whole interval between reads: the mean of NVML's samples
//! since the previous read, not the one sample current at the read.

use crate::support::{value, Exporter};

#[test]
fn a_gpu_busy_a_fifth_of_each_second_reads_a_fifth_not_zero_or_one() {
    let e = Exporter::builder(crate::support::workspace().join("tests/scenarios/duty-cycle.yaml"))
        .arg("--sample.interval=1s")
        .start();
    let stamp = |m: &str| value(m, "tessera_last_sample_timestamp_seconds{").unwrap_or(0.0);
    let mut seen = Vec::new();
    let mut last = stamp(&e.metrics());
    // The first read has no previous one to start from and takes the newest sample.
    e.wait_until("a second read", |e| stamp(&e.metrics()) > last);
    last = stamp(&e.metrics());
    while seen.len() < 5 {
        e.wait_until("the next read", |e| stamp(&e.metrics()) > last);
        let m = e.metrics();
        last = stamp(&m);
        let u = value(&m, "gpu_utilization_ratio{").expect("gpu_utilization_ratio");
        seen.push(u);
    }
    // 1 busy sample among the 4 to 6 a read covers.
    assert!(
        seen.iter().all(|u| (0.15..=0.34).contains(u)),
        "readings {seen:?}"
    );
    e.stop();
}

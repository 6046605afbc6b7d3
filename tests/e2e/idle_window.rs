//! A process alone on its GPU is not counted idle on one zero reading of NVML's device
//! utilization (a snapshot of the last ~167 ms on an H100): only once the zero readings span
//! the activity window (`--activity.window=2s` here, so 1.6 s of them).

use crate::support::Exporter;

fn gpu0_compute(e: &Exporter) -> serde_json::Value {
    let body = e
        .get("/debug/attribution")
        .map(|(_, b)| b)
        .unwrap_or_default();
    let v: serde_json::Value = serde_json::from_str(&body).unwrap_or_default();
    v["gpus"][0]["compute"].clone()
}

#[test]
fn a_zero_reading_waits_for_the_window_before_idle() {
    let e = Exporter::builder(crate::support::workspace().join("tests/scenarios/alone-gap.yaml"))
        .arg("--web.enable-debug")
        .start();
    e.wait_until("the device busy with its lone process", |e| {
        gpu0_compute(e)["method"] == "sole-active-process"
            && gpu0_compute(e)["device_activity"] == 0.4
    });
    e.wait_until("a zero reading, not yet idle", |e| {
        let c = gpu0_compute(e);
        c["device_activity"] == 0.0
            && c["method"] == "sole-active-process"
            && c["idle_unsettled"] == true
    });
    e.wait_until("idle once the zero readings span the window", |e| {
        gpu0_compute(e)["method"] == "idle"
    });
    e.stop();
}

//! End to end: the real binary, the fake NVML library, scenario files, golden expositions.

use crate::support::{assert_golden, scenario, value, Exporter};

#[test]
fn mig_layout() {
    let e = Exporter::builder(scenario("mig.yaml")).start();
    // GPM needs two samples before per-instance activity exists.
    let m = e.wait_for_series("gpu_mig_instance_sm_activity_ratio{");
    assert_eq!(value(&m, "gpu_mig_slices{"), Some(7.0));
    assert_eq!(
        value(&m, "gpu_mig_slices_used{"),
        Some(6.0),
        "3g + 2g + 1g leaves one slice"
    );
    assert!(m.contains(r#"gpu_info{node="test-node",gpu="0""#));
    assert!(m
        .lines()
        .any(|l| l.starts_with("gpu_info{") && l.contains(r#"mig_mode="enabled""#)));
    assert!(
        !m.lines()
            .any(|l| l.starts_with("gpu_utilization_ratio{") && l.contains(r#"gpu="0""#)),
        "NVML gives no device utilization on MIG GPUs; it must not be invented"
    );
    assert!(
        !m.lines()
            .any(|l| l.starts_with("gpu_process_sm_utilization_ratio{")
                && l.contains("mig_uuid=\"MIG-")),
        "NVML gives no per-process utilization under MIG"
    );
    assert_golden("mig", &m);
    e.stop();
}

#[test]
fn mps_server_and_clients() {
    let e = Exporter::builder(scenario("mps.yaml")).start();
    let m = e.wait_for_series("gpu_sm_activity_ratio{");
    let types: Vec<&str> = m
        .lines()
        .filter(|l| l.starts_with("gpu_process_memory_used_bytes{"))
        .filter_map(|l| l.split("type=\"").nth(1)?.split('"').next())
        .collect();
    assert!(types.contains(&"mps_server"), "{types:?}");
    assert!(
        types.iter().filter(|t| **t == "mps_client").count() >= 2,
        "{types:?}"
    );
    assert!(m.contains(r#"sharing_mode="mps""#));
    assert_golden("mps", &m);
    e.stop();
}

#[test]
fn the_default_detail_leaves_out_what_only_full_detail_serves() {
    let e = Exporter::builder(scenario("mps.yaml"))
        .arg("--metrics.detail=default")
        .start();
    let m = e.wait_for_series("gpu_sm_activity_ratio{");
    let families: std::collections::BTreeSet<&str> = m
        .lines()
        .filter(|l| !l.starts_with('#'))
        .filter_map(|l| l.split(['{', ' ']).next())
        .collect();
    for f in tessera_exporter::metrics::table::FULL_DETAIL_ONLY {
        assert!(
            !families
                .iter()
                .any(|n| n.trim_end_matches("_total") == f.name),
            "{} served at the default detail",
            f.name
        );
    }
    // The MPS server and clients are there, and the mission's per-process memory is served
    // for each of them at the default detail; their compute series were left out.
    let process_memory = m
        .lines()
        .filter(|l| l.starts_with("gpu_process_memory_used_bytes{"))
        .count();
    assert_eq!(process_memory, 3, "{m}");
    assert!(families.contains("gpu_sm_activity_ratio"), "{families:?}");
    let reasons: Vec<&str> = m
        .lines()
        .filter(|l| l.starts_with("gpu_clock_event_reasons_active{"))
        .filter_map(|l| l.split("reason=\"").nth(1)?.split('"').next())
        .collect();
    assert!(reasons.contains(&"sw_power_cap"), "{reasons:?}");
    assert!(!reasons.contains(&"gpu_idle"), "{reasons:?}");
    e.stop();
}

#[test]
fn time_sliced_processes_get_no_made_up_share() {
    // Two processes run kernels time-sliced; NVML books the device's utilization to one of
    // them (as the H100 does), so tessera withholds both shares and shows the utilization as
    // unattributed instead of publishing the inverted split.
    let e = Exporter::builder(scenario("timesliced.yaml")).start();
    e.wait_for_series("gpu_unattributed_utilization_ratio{");
    // Past GPM's first pair of samples: the golden file is the steady exposition, whichever
    // sample the first scrape caught.
    let m = e.settle();
    assert!(
        !m.lines()
            .any(|l| l.starts_with("gpu_process_sm_utilization_ratio{")),
        "{m}"
    );
    let gpu = value(&m, "gpu_utilization_ratio{").unwrap_or(0.0);
    let unattributed = value(&m, "gpu_unattributed_utilization_ratio{").unwrap_or(-1.0);
    assert!((unattributed - gpu).abs() < 1e-9, "{unattributed} vs {gpu}");
    assert!(m.contains(r#"method="withheld"} 1"#));
    assert_golden("timesliced", &m);
    e.stop();
}

#[test]
fn a_lost_gpu_reports_down_and_the_others_keep_going() {
    let e = Exporter::builder(scenario("gpu-lost.yaml")).start();
    e.wait_until("GPU 1 down", |e| {
        value(&e.metrics(), r#"gpu_up{node="test-node",gpu="1""#) == Some(0.0)
    });
    let m = e.settle();
    assert_eq!(value(&m, r#"gpu_up{node="test-node",gpu="0""#), Some(1.0));
    assert!(m.contains(r#"gpu_memory_used_bytes{node="test-node",gpu="0""#));
    assert!(
        !m.contains(r#"gpu_memory_used_bytes{node="test-node",gpu="1""#),
        "a lost GPU's figures are not kept"
    );
    let xid = e.wait_for_series(r#"gpu_xid_errors_total{node="test-node",gpu="1""#);
    assert!(xid.contains(r#"xid="79"} 1"#), "{xid}");
    assert_golden("gpu-lost", &per_failed_sample(&xid));
    e.stop();
}

/// The exposition with each NVML error count divided by the number of samples that met the
/// lost GPU (its temperature call fails once in each): how many samples fell between the loss
/// and this read depends on the host's speed, how many failures one sample counts does not.
fn per_failed_sample(exposition: &str) -> String {
    let errors = "tessera_nvml_errors_total{";
    let samples = value(
        exposition,
        &format!(r#"{errors}node="test-node",call="temperature"}}"#),
    )
    .filter(|&n| n >= 1.0)
    .unwrap_or_else(|| panic!("no failed temperature call counted:\n{exposition}"));
    let mut out = String::new();
    for line in exposition.lines() {
        match line.rsplit_once(' ') {
            Some((series, v)) if series.starts_with(errors) => {
                let count: f64 = v.parse().unwrap_or_else(|_| panic!("{line}"));
                let per = count / samples;
                assert_eq!(
                    per.fract(),
                    0.0,
                    "{line}: not a whole number per failed sample ({samples})"
                );
                out.push_str(&format!("{series} {per:?}\n"));
            }
            _ => {
                out.push_str(line);
                out.push('\n');
            }
        }
    }
    out
}

#[test]
fn a_gpu_lost_before_discovery_reads_down_and_the_others_are_not_restarted() {
    for isolation in ["thread", "process"] {
        lost_before_discovery(isolation);
    }
}

fn lost_before_discovery(isolation: &str) {
    let e =
        Exporter::builder(crate::support::workspace().join("tests/scenarios/lost-at-start.yaml"))
            .arg(format!("--nvml.isolation={isolation}"))
            .start();
    let m = e.wait_for_series(r#"gpu_down_reason{node="test-node",gpu="1""#);
    assert_eq!(
        value(&m, r#"gpu_up{node="test-node",gpu="1""#),
        Some(0.0),
        "{m}"
    );
    assert!(m.contains(r#"reason="nvml_no_handle"} 1"#), "{m}");
    assert_eq!(value(&m, r#"gpu_up{node="test-node",gpu="0""#), Some(1.0));
    assert!(m.contains(r#"gpu_process_memory_used_bytes{node="test-node",gpu="0""#));
    // Several samples later GPU 0 is still sampled by the worker discovery started: discovery
    // ran once, not once a sample.
    let t0 = value(&m, "tessera_last_sample_timestamp_seconds{").unwrap_or(0.0);
    e.wait_until("three newer samples", |e| {
        value(&e.metrics(), "tessera_last_sample_timestamp_seconds{").unwrap_or(0.0) > t0 + 2.5
    });
    let log = e.stop();
    let discoveries = log.matches("discovered GPUs").count();
    assert!(
        discoveries <= 2,
        "{isolation}: discovery ran once per sampler, not once a sample:\n{log}"
    );
    assert!(
        log.contains("unreachable"),
        "{isolation}: the log names the GPU without a handle:\n{log}"
    );
}

#[test]
fn a_failing_call_marks_the_collector_and_serving_continues() {
    let e = Exporter::builder(scenario("call-fails.yaml")).start();
    let m = e.wait_for_series(r#"tessera_nvml_errors_total{node="test-node",call="power_usage"}"#);
    assert_eq!(
        value(
            &m,
            r#"tessera_collector_success{node="test-node",collector="nvml"}"#
        ),
        Some(0.0)
    );
    assert!(m.contains(r#"gpu_power_watts{node="test-node",gpu="0""#));
    assert!(!m.contains(r#"gpu_power_watts{node="test-node",gpu="1""#));
    assert_eq!(
        value(&m, r#"gpu_up{node="test-node",gpu="1""#),
        Some(1.0),
        "one failing reading is not a lost GPU"
    );
    // Errors keep counting while serving goes on.
    let before = value(
        &m,
        r#"tessera_nvml_errors_total{node="test-node",call="power_usage"}"#,
    )
    .unwrap_or(0.0);
    e.wait_until("more errors counted", |e| {
        value(
            &e.metrics(),
            r#"tessera_nvml_errors_total{node="test-node",call="power_usage"}"#,
        )
        .unwrap_or(0.0)
            > before
    });
    // The golden file is the steady exposition (GPM's pairs of samples in), whichever sample
    // the first scrape caught.
    let settled = e.settle();
    let mut stable = settled
        .lines()
        .filter(|l| !l.starts_with("tessera_nvml_errors_total"))
        .collect::<Vec<_>>()
        .join("\n");
    stable.push('\n');
    assert_golden("call-fails", &stable);
    e.stop();
}

#[test]
fn processes_that_leave_take_their_series_with_them() {
    let e = Exporter::builder(scenario("churn.yaml")).start();
    let m =
        e.wait_for_series(r#"gpu_process_memory_used_bytes{node="test-node",gpu="0",uuid="GPU-"#);
    let mut m = m;
    e.wait_until("phase after", |e| {
        m = e.metrics();
        m.contains(r#"pid="5103""#) && m.contains(r#"pid="5202""#)
    });
    // Memory utilization is read every few seconds while nothing needs it each cycle: on a slow
    // host the read before the change may be the one that stands. The golden file is the
    // phase after, once that read came.
    e.wait_until("memory utilization of the phase after", |e| {
        let m = e.metrics();
        let mem = |gpu: &str| {
            value(
                &m,
                &format!(r#"gpu_memory_utilization_ratio{{node="test-node",gpu="{gpu}""#),
            )
        };
        mem("0") == Some(0.18) && mem("1") == Some(0.2)
    });
    // HBM temperature and the energy split come from reads of their own cadence too; the golden
    // file is the phase after in all of them, whichever read came first on this host.
    e.wait_until("the slow readings of the phase after", |e| {
        let m = e.metrics();
        let hbm = |gpu: &str| {
            m.lines()
                .find(|l| {
                    l.starts_with(&format!(
                        r#"gpu_temperature_celsius{{node="test-node",gpu="{gpu}""#
                    )) && l.contains(r#"sensor="memory""#)
                })
                .and_then(|l| l.rsplit_once(' '))
                .and_then(|(_, v)| v.parse::<f64>().ok())
        };
        hbm("0") == Some(70.0)
            && hbm("1") == Some(68.0)
            && m.matches(r#"gpu_energy_unattributed_joules_total{node="test-node""#)
                .count()
                == 2
    });
    let m = e.settle();
    assert!(
        !m.contains(r#"pid="5101""#) && !m.contains(r#"pid="5201""#),
        "{m}"
    );
    assert!(m.contains(r#"pid="5102""#));
    assert_golden("churn-after", &m);
    e.stop();
}

#[test]
fn hostile_process_names_are_escaped() {
    let name = b"evil\"quote\\slash\nnewline";
    let e = Exporter::builder(scenario("timesliced.yaml"))
        .comm(pid_of_first_process("timesliced.yaml"), name)
        .start();
    let m = e.wait_for_series("gpu_process_memory_used_bytes{");
    assert!(
        m.contains(r#"process="evil\"quote\\slash\nnewline""#),
        "label value must be escaped:\n{m}"
    );
    assert!(
        !m.lines().any(|l| l == "newline\""),
        "a raw newline would split the series"
    );
    e.stop();
}

fn pid_of_first_process(file: &str) -> u32 {
    let text = std::fs::read_to_string(scenario(file)).unwrap();
    text.split("pid:")
        .nth(1)
        .and_then(|r| r.trim_start().split(|c: char| !c.is_ascii_digit()).next())
        .and_then(|p| p.parse().ok())
        .expect("a pid in the scenario")
}

#[test]
fn endpoints_and_content_type() {
    let e = Exporter::builder(scenario("timesliced.yaml")).start();
    let (status, head, _) = crate::support::http_get(e.port, "/metrics").unwrap();
    assert_eq!(status, 200);
    assert!(
        head.to_ascii_lowercase()
            .contains("content-type: application/openmetrics-text; version=1.0.0; charset=utf-8"),
        "{head}"
    );
    assert_eq!(e.get("/healthz").unwrap().0, 200);
    assert_eq!(e.get("/readyz").unwrap().0, 200);
    assert!(e.get("/").unwrap().1.contains("/metrics"));
    let (status, body) = e.get("/debug/attribution").unwrap();
    assert_eq!(status, 404, "debug endpoints are off by default");
    assert!(
        body.contains("--web.enable-debug"),
        "the 404 names the flag that turns it on: {body:?}"
    );
    assert!(e.metrics().ends_with("# EOF\n"));

    // Prometheus asks for gzip; the body must be the same exposition, compressed.
    let (status, head, body) =
        crate::support::http_get_raw(e.port, "/metrics", "Accept-Encoding: gzip\r\n").unwrap();
    assert_eq!(status, 200);
    let head = head.to_ascii_lowercase();
    assert!(head.contains("content-encoding: gzip"), "{head}");
    assert!(head.contains("vary: accept-encoding"), "{head}");
    let mut text = String::new();
    std::io::Read::read_to_string(&mut flate2::read::GzDecoder::new(&body[..]), &mut text)
        .expect("a gzip body");
    assert!(
        text.starts_with("# HELP") && text.ends_with("# EOF\n"),
        "{text}"
    );
    assert!(text.contains(r#"gpu_info{node="test-node",gpu="0""#));
    let (_, head, _) =
        crate::support::http_get_raw(e.port, "/metrics", "Accept-Encoding: gzip;q=0\r\n").unwrap();
    assert!(
        !head.to_ascii_lowercase().contains("content-encoding"),
        "{head}"
    );
    let log = e.stop();
    assert!(
        log.contains("shutting down"),
        "graceful shutdown on SIGTERM:\n{log}"
    );
}

#[test]
fn a_hung_call_isolates_its_gpu_and_serving_goes_on() {
    let e = Exporter::builder(crate::support::workspace().join("tests/scenarios/hang.yaml"))
        .arg("--nvml.timeout=300ms")
        .start();
    let gpu_up = |m: &str, gpu: &str| value(m, &format!(r#"gpu_up{{node="test-node",gpu="{gpu}""#));
    let mut m = String::new();
    e.wait_until("GPU 1 reported down while its call hangs", |e| {
        m = e.metrics();
        gpu_up(&m, "1") == Some(0.0)
    });
    assert_eq!(gpu_up(&m, "0"), Some(1.0), "the other GPU keeps reporting");
    assert!(m.contains(r#"gpu_process_memory_used_bytes{node="test-node",gpu="0""#));
    assert!(
        value(
            &m,
            r#"tessera_nvml_errors_total{node="test-node",call="gpu_timeout"}"#
        )
        .unwrap_or(0.0)
            >= 1.0
    );
    assert_eq!(
        value(
            &m,
            r#"tessera_collector_success{node="test-node",collector="nvml"}"#
        ),
        Some(0.0)
    );
    // Samples keep coming at the timeout's pace: the stuck call does not hold the cycle.
    let t0 = value(&m, "tessera_last_sample_timestamp_seconds{").unwrap_or(0.0);
    e.wait_until("a newer sample", |e| {
        value(&e.metrics(), "tessera_last_sample_timestamp_seconds{").unwrap_or(0.0) > t0
    });
    e.wait_until("GPU 1 back once its call returned", |e| {
        gpu_up(&e.metrics(), "1") == Some(1.0)
    });
    e.stop();
}

#[test]
fn nvml_failing_to_initialize_keeps_the_exporter_alive_and_not_ready() {
    let scenario = crate::support::workspace().join("tests/scenarios/init-fails.yaml");
    let e = Exporter::builder(scenario).start_unready();
    e.wait_until("serving", |e| {
        e.get("/healthz").map(|(s, _)| s == 200).unwrap_or(false)
    });
    // Retries run in the background; readiness and /metrics say no sample yet.
    std::thread::sleep(std::time::Duration::from_millis(1500));
    assert_eq!(e.get("/readyz").unwrap().0, 503);
    assert_eq!(e.get("/metrics").unwrap().0, 503);
    let log = e.stop();
    let lines = log.lines().filter(|l| l.contains("NVML")).count();
    assert!(lines <= 3, "one clear line, not one per retry:\n{log}");
    assert!(log.contains("NVML failed to initialize"), "{log}");
}

fn has_series(m: &str, family: &str, needle: &str) -> bool {
    m.lines()
        .any(|l| l.starts_with(&format!("{family}{{")) && l.contains(needle))
}

#[test]
fn a_live_mig_repartition_leaves_no_stale_series() {
    const OLD_3G: &str = "MIG-3a000000-0000-4000-8000-000000000001";
    const OLD_2G: &str = "MIG-2b000000-0000-4000-8000-000000000002";
    const NEW_1G: &str = "MIG-4d000000-0000-4000-8000-000000000004";
    const NEW_3G: &str = "MIG-3f000000-0000-4000-8000-000000000006";
    let activity = "gpu_mig_instance_sm_activity_ratio";
    let e = Exporter::builder(scenario("mig-repartition.yaml")).start();
    e.wait_until("the 2g.20gb's activity", |e| {
        has_series(&e.metrics(), activity, OLD_2G)
    });

    e.wait_until("the split layout", |e| e.metrics().contains(NEW_1G));
    let m = e.settle();
    assert!(!m.contains(OLD_2G), "destroyed instance left series:\n{m}");
    assert!(!m.contains(r#"pid="3102""#), "its process left series");
    assert_eq!(
        m.lines()
            .filter(|l| l.starts_with("gpu_mig_instance_info{"))
            .count(),
        4
    );
    assert!(m
        .lines()
        .any(|l| l.starts_with("gpu_process_memory_used_bytes{")
            && l.contains(r#"pid="3103""#)
            && l.contains(NEW_1G)));

    // Destroyed and recreated between two samples under the same GPU instance id: a GPM delta
    // across the two would mix instances (and the driver refuses it).
    e.wait_until("the recreated 3g.40gb's activity", |e| {
        has_series(&e.metrics(), activity, NEW_3G)
    });
    let m = e.settle();
    assert!(!m.contains(OLD_3G), "destroyed instance left series:\n{m}");
    assert_eq!(
        value(&m, "tessera_nvml_errors_total{"),
        None,
        "no NVML call failed across the re-partitions:\n{m}"
    );
    assert!(has_series(
        &m,
        "gpu_process_memory_used_bytes",
        r#"pid="3201""#
    ));
    assert_golden("mig-repartitioned", &m);
    e.stop();
}

#[test]
fn process_utilization_is_read_on_its_own_cadence() {
    // NVML's raw per-process figure (shown by /debug/attribution) is read on its own cadence;
    // the published share of a lone process is the device's utilization, every sample.
    let raw = |e: &Exporter| {
        e.get("/debug/attribution")
            .map(|(_, body)| body)
            .unwrap_or_default()
    };
    let e = Exporter::builder(
        crate::support::workspace().join("tests/scenarios/process-interval.yaml"),
    )
    .arg("--nvml.process-interval=4s")
    .arg("--web.enable-debug")
    .start();
    // A process NVML lists for the first time is read at once, not after the interval.
    e.wait_until("the first per-process read", |e| {
        raw(e).contains(r#""sm_utilization":0.2"#)
    });
    let sm = r#"gpu_process_sm_utilization_ratio{node="test-node",gpu="0""#;
    e.wait_until("the device sees the new load", |e| {
        let m = e.metrics();
        value(&m, "gpu_utilization_ratio{") == Some(0.7) && value(&m, sm) == Some(0.7)
    });
    // ...while NVML's raw per-process figure keeps the last read until the next, ~4 s in.
    assert!(raw(&e).contains(r#""sm_utilization":0.2"#));
    e.wait_until("the next per-process read", |e| {
        raw(e).contains(r#""sm_utilization":0.7"#)
    });
    e.stop();
}

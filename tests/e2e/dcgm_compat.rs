//! End to end: `--metrics.dcgm-compat` on the real binary against the fake NVML. The demo's
//! compat exposition is a golden file; the second listener serves only the compat families,
//! behind the same web config; GPM that fails shows as unavailable, never as 0.

use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::support::{assert_golden, fake_library, free_port, http_get, scenario, value, Exporter};

/// The demo as users start it, with compat on and the second listener.
struct Demo {
    child: Child,
    main: u16,
    dcgm: u16,
}

impl Demo {
    /// A port picked free can be taken before tessera binds it (two test runs at once each
    /// start demos, whose fake API servers bind ephemeral ports too); tessera then exits at
    /// once, so it is started again on new ports. 1 of 50 concurrent runs met this.
    fn start(extra: &[String]) -> Demo {
        for _ in 0..5 {
            let mut d = Demo::spawn(extra);
            if d.serving() {
                return d;
            }
        }
        panic!("tessera --demo did not start on free ports in 5 attempts");
    }

    fn spawn(extra: &[String]) -> Demo {
        let (main, dcgm) = (free_port(), free_port());
        let child = Command::new(env!("CARGO_BIN_EXE_tessera"))
            .arg("--demo")
            .arg("--metrics.dcgm-compat")
            .arg(format!("--nvml.library={}", fake_library().display()))
            .arg(format!("--web.listen-address=127.0.0.1:{main}"))
            .arg(format!("--web.dcgm-listen-address=127.0.0.1:{dcgm}"))
            .arg("--kube.node-name=test-node")
            .args(extra)
            .env_remove("TESSERA_DEMO")
            .env_remove("KUBERNETES_SERVICE_HOST")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("spawn tessera --demo");
        Demo { child, main, dcgm }
    }

    /// Whether both listeners answer while the process still runs (false once it has exited).
    fn serving(&mut self) -> bool {
        let deadline = Instant::now() + Duration::from_secs(60);
        while Instant::now() < deadline {
            let answers =
                http_get(self.main, "/metrics").is_ok() && http_get(self.dcgm, "/metrics").is_ok();
            // Asked after the answers: a port another process holds answers too.
            if !matches!(self.child.try_wait(), Ok(None)) {
                return false;
            }
            if answers {
                return true;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        false
    }

    fn wait_until(&self, what: &str, mut cond: impl FnMut() -> bool) {
        // Generous: two test runs at once on two loaded cores start slowly.
        let deadline = Instant::now() + Duration::from_secs(60);
        while Instant::now() < deadline {
            if cond() {
                return;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        panic!("timed out waiting for {what}");
    }
}

impl Drop for Demo {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn body(port: u16, path: &str) -> String {
    match http_get(port, path) {
        Ok((200, _, b)) => b,
        _ => String::new(),
    }
}

fn families(text: &str) -> Vec<&str> {
    text.lines()
        .filter(|l| !l.starts_with('#') && !l.is_empty())
        .filter_map(|l| l.split(['{', ' ']).next())
        .collect()
}

#[test]
fn the_demo_serves_dcgm_names_split_per_tenant_and_the_second_listener_only_those() {
    let d = Demo::start(&[]);
    // Pods come from the demo's kubelet and API server, and the MPS shares from its probe feed.
    d.wait_until("pod labels on the compat series", || {
        let m = body(d.dcgm, "/metrics");
        m.contains(r#"pod="llm-pretrain-0""#)
            && m.lines().any(|l| {
                l.starts_with("DCGM_FI_PROF_GR_ENGINE_ACTIVE{") && l.contains(r#"pod="ranker-a-"#)
            })
            && m.contains("DCGM_FI_PROF_SM_ACTIVE{")
    });
    // Two more samples (1 s apart), so windowed figures cover only the present.
    std::thread::sleep(Duration::from_millis(2500));
    let compat = body(d.dcgm, "/metrics");
    let all = body(d.main, "/metrics");
    assert!(compat.ends_with("# EOF\n") && all.ends_with("# EOF\n"));
    assert_eq!(all.matches("# EOF").count(), 1);

    // The second listener: compat families only; the main one: both.
    let names = families(&compat);
    assert!(!names.is_empty());
    assert!(names.iter().all(|n| n.starts_with("DCGM_FI_")), "{names:?}");
    assert!(families(&all).contains(&"gpu_up"));
    assert!(families(&all).contains(&"DCGM_FI_DEV_GPU_TEMP"));
    let (status, _, _) = http_get(d.dcgm, "/debug/attribution").expect("get");
    assert_eq!(status, 404, "the compat listener serves no debug pages");

    // No container on a shared GPU is handed the device's value: on the time-sliced GPU 4
    // every tenant's share is withheld, so the whole value is one series without a pod.
    let gr: Vec<&str> = compat
        .lines()
        .filter(|l| l.starts_with("DCGM_FI_PROF_GR_ENGINE_ACTIVE{") && l.contains(r#"gpu="4""#))
        .collect();
    assert_eq!(gr.len(), 1, "{gr:?}");
    assert!(gr[0].contains(r#"pod="""#), "{}", gr[0]);
    // Sum by UUID equals the device value for an additive field (GPU 5, MPS, probe shares);
    // both from one scrape of the main listener, so from one sample.
    let gpu5 = |fam: &str| -> f64 {
        all.lines()
            .filter(|l| l.starts_with(fam) && l.contains(r#"gpu="5""#))
            .filter_map(|l| l.rsplit_once(' ')?.1.parse::<f64>().ok())
            .sum()
    };
    let device = value(&all, r#"gpu_utilization_ratio{node="test-node",gpu="5""#).unwrap();
    // Shares above the device are scaled to it and a shortfall is the remainder, so the sum is
    // the device's value to float rounding, whatever the probe's timing.
    let sum = gpu5("DCGM_FI_PROF_GR_ENGINE_ACTIVE{");
    assert!((sum - device).abs() < 1e-6, "{sum} vs {device}");
    let used = value(&all, r#"gpu_memory_used_bytes{node="test-node",gpu="5""#).unwrap();
    assert!((gpu5("DCGM_FI_DEV_FB_USED{") - used / 1048576.0).abs() < 1e-6);

    assert_golden("dcgm-compat-demo", &compat);
}

#[test]
fn the_second_listener_applies_the_web_config() {
    let dir = tempfile::tempdir().unwrap();
    let web = dir.path().join("web.yml");
    // bcrypt of "secret" (cost 4, as the web_security tests use).
    let hash = bcrypt::hash("secret", 4).unwrap();
    std::fs::write(&web, format!("basic_auth_users:\n  prom: {hash}\n")).unwrap();
    let d = Demo::start(&[format!("--web.config.file={}", web.display())]);
    d.wait_until("the compat listener", || {
        matches!(http_get(d.dcgm, "/metrics"), Ok((401, _, _)))
    });
    let (status, _, _) = crate::support::http_get_raw(d.dcgm, "/metrics", "").unwrap();
    assert_eq!(status, 401, "no credentials, no metrics");
    let auth = format!(
        "Authorization: Basic {}\r\n",
        base64::Engine::encode(&base64::engine::general_purpose::STANDARD, "prom:secret")
    );
    d.wait_until("an authorised scrape", || {
        crate::support::http_get_raw(d.dcgm, "/metrics", &auth)
            .map(|(s, _, b)| s == 200 && String::from_utf8_lossy(&b).contains("DCGM_FI_"))
            .unwrap_or(false)
    });
}

#[test]
fn gpm_that_fails_is_shown_unavailable_and_its_figures_are_absent() {
    let e = Exporter::builder(scenario("gpm-unavailable.yaml"))
        .arg("--metrics.dcgm-compat")
        .arg("--web.enable-debug")
        .start();
    let m = e.wait_for_series(r#"gpu_gpm_available{node="test-node",gpu="0""#);
    let m = if m.contains(r#"gpu_gpm_available{node="test-node",gpu="1""#) {
        m
    } else {
        e.wait_for_series(r#"gpu_gpm_available{node="test-node",gpu="1""#)
    };
    let m = if m.contains("gpu_sm_activity_ratio{") {
        m
    } else {
        e.wait_for_series("gpu_sm_activity_ratio{")
    };
    assert_eq!(
        value(&m, r#"gpu_gpm_available{node="test-node",gpu="1""#),
        Some(0.0)
    );
    assert!(
        m.lines().any(
            |l| l.starts_with(r#"gpu_gpm_available{node="test-node",gpu="1""#)
                && l.contains(r#"reason="in_use""#)
        ),
        "{m}"
    );
    let gpu1 = |fam: &str| {
        m.lines()
            .any(|l| l.starts_with(fam) && l.contains(r#"gpu="1""#))
    };
    let gpu0 = |fam: &str| {
        m.lines()
            .any(|l| l.starts_with(fam) && l.contains(r#"gpu="0""#))
    };
    for fam in [
        "gpu_sm_activity_ratio{",
        "DCGM_FI_PROF_SM_ACTIVE{",
        "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE{",
    ] {
        assert!(!gpu1(fam), "{fam} on the GPU whose GPM failed");
        assert!(gpu0(fam), "{fam} missing on the healthy GPU");
    }
    // NVML's own utilization does not need GPM and stays.
    assert!(gpu1("DCGM_FI_PROF_GR_ENGINE_ACTIVE{"));
    let (_, debug) = e.get("/debug/attribution").unwrap();
    assert!(
        debug.contains(r#""gpm":{"available":false,"reason":"in_use"}"#),
        "{debug}"
    );
}

#[test]
fn a_lost_gpu_shows_its_last_xid_and_the_other_gpu_none() {
    let e = Exporter::builder(scenario("gpu-lost.yaml"))
        .arg("--metrics.dcgm-compat")
        .start();
    let m = e.wait_for_series(r#"gpu_xid_errors_total{node="test-node",gpu="1""#);
    let xid = |gpu: &str| {
        m.lines()
            .find(|l| {
                l.starts_with("DCGM_FI_DEV_XID_ERRORS{") && l.contains(&format!("gpu=\"{gpu}\""))
            })
            .and_then(|l| l.rsplit_once(' ')?.1.parse::<f64>().ok())
    };
    assert_eq!(xid("1"), Some(79.0), "{m}");
    assert_eq!(xid("0"), Some(0.0), "watched, nothing seen");
    // Nothing else of the lost GPU survives in the compat families.
    assert!(!m
        .lines()
        .any(|l| l.starts_with("DCGM_FI_DEV_GPU_TEMP{") && l.contains(r#"gpu="1""#)));
}

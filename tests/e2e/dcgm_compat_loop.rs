//! The compat surface over the demo's whole scenario loop: in every snapshot, on every GPU and
//! MIG instance, each additive compat field's series add up to tessera's own device figure,
//! never more; on a MIG GPU memory's sum by UUID alone is the GPU's. The demo runs its clock ten times faster (`TESSERA_DEMO_TIME_SCALE`),
//! so the 120 s loop, with its phase changes, XID and process churn, passes in 12 s.

use std::collections::BTreeMap;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::support::{fake_library, free_port, http_get, parse_samples, KillOnDrop, Sample};

const MIB: f64 = 1024.0 * 1024.0;
/// The loop at a tenth of its time, plus a phase: every phase is seen at least once whole.
const WATCH: Duration = Duration::from_secs(16);

/// A device: (GPU UUID, GPU instance id or "").
type Key = (String, String);

/// tessera's own device figure for a compat field, in the compat unit, per device.
fn device_values(s: &[Sample], field: &str) -> BTreeMap<Key, f64> {
    let get = |family: &str, mig: bool| -> BTreeMap<Key, f64> {
        s.iter()
            .filter(|(n, l, _)| n == family && l.contains_key("gpu_instance_id") == mig)
            .map(|(_, l, v)| {
                let gi = l.get("gpu_instance_id").cloned().unwrap_or_default();
                ((l["uuid"].clone(), gi), *v)
            })
            .collect()
    };
    let scaled =
        |m: BTreeMap<Key, f64>, f: f64| m.into_iter().map(|(k, v)| (k, v * f)).collect::<Vec<_>>();
    let free = |mig: bool| -> BTreeMap<Key, f64> {
        let (total, used, reserved) = if mig {
            (
                get("gpu_mig_instance_memory_total_bytes", true),
                get("gpu_mig_instance_memory_used_bytes", true),
                BTreeMap::new(),
            )
        } else {
            (
                get("gpu_memory_total_bytes", false),
                get("gpu_memory_used_bytes", false),
                get("gpu_memory_reserved_bytes", false),
            )
        };
        total
            .iter()
            .filter_map(|(k, t)| {
                let u = used.get(k)?;
                let r = reserved.get(k).copied().unwrap_or(0.0);
                Some((k.clone(), (t - u - r).max(0.0) / MIB))
            })
            .collect()
    };
    let mut out: BTreeMap<Key, f64> = BTreeMap::new();
    match field {
        "DCGM_FI_PROF_GR_ENGINE_ACTIVE" => {
            out.extend(get("gpu_utilization_ratio", false));
            out.extend(get("gpu_mig_instance_sm_activity_ratio", true));
        }
        "DCGM_FI_DEV_GPU_UTIL" => out.extend(scaled(get("gpu_utilization_ratio", false), 100.0)),
        "DCGM_FI_PROF_SM_ACTIVE" => {
            out.extend(get("gpu_sm_activity_ratio", false));
            out.extend(get("gpu_mig_instance_sm_activity_ratio", true));
        }
        "DCGM_FI_DEV_FB_USED" => {
            out.extend(scaled(get("gpu_memory_used_bytes", false), 1.0 / MIB));
            out.extend(scaled(
                get("gpu_mig_instance_memory_used_bytes", true),
                1.0 / MIB,
            ));
        }
        "DCGM_FI_DEV_FB_FREE" => {
            out.extend(free(false));
            out.extend(free(true));
        }
        _ => {}
    }
    out
}

/// Fields whose MIG instances' values are parts of the GPU's.
const PARTS_OF_THE_GPU: [&str; 2] = ["DCGM_FI_DEV_FB_USED", "DCGM_FI_DEV_FB_FREE"];

/// The additive fields with a tenant series somewhere, whose sums the test checks.
const FIELDS: [&str; 5] = [
    "DCGM_FI_PROF_GR_ENGINE_ACTIVE",
    "DCGM_FI_DEV_GPU_UTIL",
    "DCGM_FI_PROF_SM_ACTIVE",
    "DCGM_FI_DEV_FB_USED",
    "DCGM_FI_DEV_FB_FREE",
];

#[test]
fn every_snapshot_of_the_demo_loop_sums_to_the_device_on_every_gpu() {
    let port = free_port();
    let child = Command::new(env!("CARGO_BIN_EXE_tessera"))
        .arg("--demo")
        .arg("--metrics.dcgm-compat")
        .arg("--metrics.detail=full")
        .arg(format!("--nvml.library={}", fake_library().display()))
        .arg(format!("--web.listen-address=127.0.0.1:{port}"))
        .arg("--kube.node-name=test-node")
        .env("TESSERA_DEMO_TIME_SCALE", "0.1")
        .env_remove("TESSERA_DEMO")
        .env_remove("KUBERNETES_SERVICE_HOST")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn tessera --demo");
    let _demo = KillOnDrop(child);

    let deadline = Instant::now() + Duration::from_secs(30);
    let mut started = None;
    let mut seen = std::collections::HashSet::new();
    let (mut snapshots, mut over, mut off, mut tenant_series) = (0, Vec::new(), Vec::new(), 0);
    let mut pods_with_compute = std::collections::BTreeSet::new();
    while Instant::now() < deadline {
        if started.is_some_and(|t: Instant| t.elapsed() > WATCH) {
            break;
        }
        std::thread::sleep(Duration::from_millis(150));
        let Ok((200, _, body)) = http_get(port, "/metrics") else {
            continue;
        };
        // Start once pods are known: before that every series is a remainder.
        if started.is_none() {
            if !body.contains(r#"pod="ranker-a-"#) {
                continue;
            }
            started = Some(Instant::now());
        }
        let samples = parse_samples(&body);
        // One snapshot per sample: the scrape after it repeats it.
        let stamp = samples
            .iter()
            .find(|(n, _, _)| n == "tessera_samples_total")
            .map(|(_, _, v)| *v);
        if !seen.insert(stamp.map(|v| v.to_bits()).unwrap_or(snapshots as u64)) {
            continue;
        }
        snapshots += 1;
        for field in FIELDS {
            let device = device_values(&samples, field);
            let mut sums: BTreeMap<Key, f64> = BTreeMap::new();
            for (_, l, v) in samples.iter().filter(|(n, _, _)| n == field) {
                let key = (
                    l["UUID"].clone(),
                    l.get("GPU_I_ID").cloned().unwrap_or_default(),
                );
                *sums.entry(key.clone()).or_default() += v;
                // A negative remainder would make any sum come out right.
                if *v < 0.0 {
                    over.push(format!("{field} {key:?}: a series reads {v}"));
                }
                if !l["pod"].is_empty() {
                    tenant_series += 1;
                    if field == "DCGM_FI_PROF_GR_ENGINE_ACTIVE" {
                        pods_with_compute.insert(l["pod"].clone());
                    }
                }
            }
            if PARTS_OF_THE_GPU.contains(&field) {
                // On a MIG GPU the row without GPU_I_ID is memory outside every instance: the
                // GPU's figure is the sum by UUID alone, its instances' rows included.
                let mut by_gpu: BTreeMap<String, f64> = BTreeMap::new();
                for ((uuid, _), v) in &sums {
                    *by_gpu.entry(uuid.clone()).or_default() += v;
                }
                let mig: Vec<String> = sums
                    .keys()
                    .filter(|(_, gi)| !gi.is_empty())
                    .map(|(uuid, _)| uuid.clone())
                    .collect();
                for uuid in mig {
                    sums.insert((uuid.clone(), String::new()), by_gpu[&uuid]);
                }
            }
            for (key, sum) in &sums {
                let Some(want) = device.get(key) else {
                    off.push(format!("{field} {key:?}: no device figure"));
                    continue;
                };
                let eps = 1e-6 * want.abs().max(1.0);
                if *sum > want + eps {
                    over.push(format!("{field} {key:?}: {sum} > {want}"));
                } else if (sum - want).abs() > eps {
                    off.push(format!("{field} {key:?}: {sum} vs {want}"));
                }
            }
        }
    }
    assert!(
        started.is_some_and(|t| t.elapsed() >= WATCH),
        "the demo did not serve pods in time"
    );
    // One sample a second over 16 s.
    assert!(snapshots >= 12, "only {snapshots} snapshots");
    assert!(tenant_series > 0, "no tenant series at all");
    // GPU 5's MPS clients carry the probe: their compute series are published.
    assert!(
        pods_with_compute.iter().any(|p| p.starts_with("ranker-")),
        "{pods_with_compute:?}"
    );
    // GPU 4 is time-sliced without the probe: none of its pods gets a compute series, the one
    // that runs nothing between its runs included.
    assert!(
        !pods_with_compute.contains("nightly-eval-28911"),
        "{pods_with_compute:?}"
    );
    assert!(over.is_empty(), "sums above the device: {over:#?}");
    assert!(off.is_empty(), "sums off the device: {off:#?}");
    eprintln!("{snapshots} snapshots checked, 0 above the device");
}

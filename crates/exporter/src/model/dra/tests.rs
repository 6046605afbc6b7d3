//! The claim parser against realistic and hostile claims, and the driver's precedence.

use serde_json::{json, Value};

use super::dra_parse::parameters;
use super::*;
use crate::model::dra_claim::ConfigKind;

const GIB: u64 = 1 << 30;
const MIB: u64 = 1 << 20;
const U0: &str = "GPU-aaaaaaaa-0000-0000-0000-000000000000";
const U1: &str = "GPU-bbbbbbbb-0000-0000-0000-000000000000";

fn gpu_config(sharing: Value) -> Value {
    json!({"apiVersion": "resource.nvidia.com/v1beta1", "kind": "GpuConfig", "sharing": sharing})
}

fn claim_json(results: Value, configs: Value) -> Value {
    json!({
        "apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
        "metadata": {"name": "c", "namespace": "ns"},
        "spec": {"devices": {"requests": [{"name": "mps-gpu", "exactly": {"deviceClassName": "gpu.nvidia.com"}}]}},
        "status": {"allocation": {"devices": {"results": results, "config": configs}}}
    })
}

fn result(request: &str, device: &str) -> Value {
    json!({"request": request, "driver": "gpu.nvidia.com", "pool": "node-a", "device": device})
}

fn from_claim(requests: Value, params: Value) -> Value {
    json!({"source": "FromClaim", "requests": requests,
        "opaque": {"driver": "gpu.nvidia.com", "parameters": params}})
}

fn mps(cfg: Value) -> Value {
    gpu_config(json!({"strategy": "MPS", "mpsConfig": cfg}))
}

/// Parameters → the sharing config, or why not.
fn sharing_of(params: Value) -> Result<Option<SharingConfig>, String> {
    parameters(&params).1
}

fn mps_of(cfg: Value) -> Result<MpsConfig, String> {
    match sharing_of(mps(cfg))? {
        Some(SharingConfig::Mps(m)) => Ok(m),
        other => Err(format!("not MPS: {other:?}")),
    }
}

fn dev(device: &str, kind: &str, uuid: Option<&str>) -> DraDevice {
    DraDevice {
        driver: NVIDIA_DRIVER.into(),
        pool: "node-a".into(),
        device: device.into(),
        uuid: uuid.map(Into::into),
        kind: Some(kind.into()),
        ..Default::default()
    }
}

fn resolved(claim: &Value, devices: &[DraDevice]) -> Vec<(String, DraDeviceConfig)> {
    let c = claim_from_json("ns", "c", claim);
    resolve(&c, |dr, p, d| {
        devices
            .iter()
            .find(|x| x.driver == dr && x.pool == p && x.device == d)
    })
    .into_iter()
    .map(|((_, _, d), cfg)| (d, cfg))
    .collect()
}

#[test]
fn the_drivers_quickstart_mps_claim() {
    let claim = claim_json(
        json!([result("mps-gpu", "gpu-0")]),
        json!([from_claim(
            json!(["mps-gpu"]),
            mps(json!({
            "defaultActiveThreadPercentage": 50, "defaultPinnedDeviceMemoryLimit": "10Gi"}))
        )]),
    );
    let c = claim_from_json("ns", "c", &claim);
    assert_eq!(c.results.len(), 1);
    assert_eq!(c.results[0].request, "mps-gpu");
    assert!(c.notes.is_empty(), "{:?}", c.notes);
    let r = resolved(&claim, &[dev("gpu-0", "gpu", Some(U0))]);
    assert_eq!(r.len(), 1);
    let cfg = &r[0].1;
    assert_eq!(cfg.claim, "ns/c");
    assert_eq!(cfg.config, "DRA GpuConfig MPS");
    assert_eq!(cfg.strategy, Some(DeclaredStrategy::Mps));
    assert_eq!(cfg.thread_ratio, Some(0.5));
    assert_eq!(cfg.memory_bytes, Some(10 * GIB));
    assert!(cfg.notes.is_empty());
}

#[test]
fn unallocated_or_shapeless_claims_say_nothing() {
    for v in [
        json!({}),
        json!(null),
        json!({"status": {}}),
        json!({"status": {"allocation": null}}),
        json!({"status": {"allocation": {"devices": {"results": "gpu-0", "config": {"a": 1}}}}}),
        json!({"status": {"allocation": {"devices": 7}}}),
    ] {
        let c = claim_from_json("ns", "c", &v);
        assert!(c.results.is_empty() && c.configs.is_empty(), "{v}");
        assert!(resolve(&c, |_, _, _| None).is_empty());
    }
}

#[test]
fn hostile_results_and_config_lists() {
    let claim = claim_json(
        json!([{"request": 1, "driver": "gpu.nvidia.com", "pool": "p", "device": "d"},
            {"request": "r"}, result("r", "gpu-0")]),
        json!([
            {"source": "FromClaim", "requests": "r", "opaque": {"driver": "gpu.nvidia.com", "parameters": {}}},
            {"source": "FromElsewhere", "opaque": {"driver": "gpu.nvidia.com", "parameters": {}}},
            {"source": "FromClaim"},
            {"source": "FromClaim", "opaque": {"driver": "other.example.com", "parameters": "junk"}},
        ]),
    );
    let c = claim_from_json("ns", "c", &claim);
    assert_eq!(c.results.len(), 1);
    assert_eq!(c.notes.len(), 2);
    // The other driver's config is skipped, as the driver skips it; the rest stay as unreadable.
    assert_eq!(c.configs.len(), 3);
    assert!(c.configs.iter().all(|k| k.sharing.is_err()));
    // The last one (unknown source, put last) governs: the device's sharing is unknown.
    let r = resolved(&claim, &[dev("gpu-0", "gpu", Some(U0))]);
    assert_eq!(r.len(), 1);
    assert_eq!(r[0].1.strategy, None);
    assert!(r[0].1.notes.iter().any(|n| n.contains("FromElsewhere")));

    let many: Vec<Value> = (0..1000)
        .map(|i| result("r", &format!("gpu-{i}")))
        .collect();
    let configs: Vec<Value> = (0..65)
        .map(|_| from_claim(json!([]), mps(json!({}))))
        .collect();
    let c = claim_from_json("ns", "c", &claim_json(json!(many), json!(configs)));
    assert_eq!(c.results.len(), 128);
    assert_eq!(c.notes.len(), 2);
    assert_eq!(c.configs.len(), 1);
    assert!(c.configs[0].sharing.is_err());
}

#[test]
fn unknown_or_malformed_parameters_are_refused_with_a_reason() {
    let cases = [
        (json!("GpuConfig"), "not an object"),
        (json!({"kind": "GpuConfig"}), "apiVersion absent"),
        (
            json!({"apiVersion": "resource.nvidia.com/v1", "kind": "GpuConfig"}),
            "is not resource.nvidia.com/v1beta1",
        ),
        (
            json!({"apiVersion": "resource.nvidia.com/v1beta1", "kind": "TpuConfig"}),
            "kind \"TpuConfig\"",
        ),
        (gpu_config(json!("MPS")), "sharing is not an object"),
        (gpu_config(json!({})), "without a strategy"),
        (
            gpu_config(json!({"strategy": "mps"})),
            "\"mps\" is not known",
        ),
        (gpu_config(json!({"strategy": 3})), "without a strategy"),
        (
            gpu_config(json!({"strategy": "MPS", "timeSlicingConfig": {}})),
            "timeSlicingConfig with the MPS",
        ),
        (
            gpu_config(json!({"strategy": "TimeSlicing", "mpsConfig": {}})),
            "mpsConfig with the TimeSlicing",
        ),
        (
            gpu_config(
                json!({"strategy": "TimeSlicing", "timeSlicingConfig": {"interval": "Eternal"}}),
            ),
            "interval \"Eternal\"",
        ),
        (
            gpu_config(json!({"strategy": "TimeSlicing", "timeSlicingConfig": []})),
            "not an object",
        ),
        (
            json!({"apiVersion": "resource.nvidia.com/v1beta1", "kind": "MigDeviceConfig",
                "sharing": {"strategy": "TimeSlicing", "timeSlicingConfig": {"interval": "Long"}}}),
            "in a MigDeviceConfig",
        ),
        (mps(json!([])), "mpsConfig is not an object"),
    ];
    for (params, why) in cases {
        let got = sharing_of(params.clone());
        match got {
            Err(e) => assert!(e.contains(why), "{params}: {e:?} lacks {why:?}"),
            Ok(s) => panic!("{params} read as {s:?}"),
        }
    }
    assert_eq!(sharing_of(gpu_config(Value::Null)), Ok(None));
    assert_eq!(
        sharing_of(gpu_config(
            json!({"strategy": "TimeSlicing", "timeSlicingConfig": {"interval": "Short"}})
        )),
        Ok(Some(SharingConfig::TimeSlicing {
            interval: Some("Short".into())
        }))
    );
    assert_eq!(
        sharing_of(gpu_config(json!({"strategy": "MPS"}))),
        Ok(Some(SharingConfig::Mps(MpsConfig::default())))
    );
    let vfio = json!({"apiVersion": "resource.nvidia.com/v1beta1", "kind": "VfioDeviceConfig"});
    assert_eq!(parameters(&vfio), (ConfigKind::Vfio, Ok(None)));
}

#[test]
fn mps_values_are_checked_like_the_driver_checks_them() {
    for bad in [
        json!(-1),
        json!(101),
        json!(50.5),
        json!("50"),
        json!(1e30),
        json!(true),
    ] {
        let got = mps_of(json!({"defaultActiveThreadPercentage": bad}));
        assert!(got.is_err(), "{bad}: {got:?}");
    }
    assert_eq!(
        mps_of(json!({"defaultActiveThreadPercentage": 100}))
            .ok()
            .and_then(|m| m.thread_percentage),
        Some(100)
    );
    for bad in [
        json!("10Gx"),
        json!("-1Gi"),
        json!("1Ki"),
        json!("0"),
        json!("99999999999Ei"),
        json!(""),
        json!("1..5Gi"),
        json!({"value": 1}),
        json!(["1Gi"]),
        json!("1e99999"),
    ] {
        let got = mps_of(json!({"defaultPinnedDeviceMemoryLimit": bad}));
        assert!(got.is_err(), "{bad}: {got:?}");
    }
    let m = mps_of(json!({"defaultPinnedDeviceMemoryLimit": 1073741824,
        "defaultPerDevicePinnedMemoryLimit": {"0": "1.5Gi", U1: "2500M"}}));
    let m = m.unwrap_or_default();
    assert_eq!(m.default_pinned_bytes, Some(GIB));
    // 2500M is 2,500,000,000 bytes: MPS gets whole MiB.
    assert!(m.per_device_pinned.contains(&(U1.to_owned(), 2384 * MIB)));
    assert!(m.per_device_pinned.contains(&("0".to_owned(), 1536 * MIB)));
    let huge: serde_json::Map<String, Value> =
        (0..300).map(|i| (i.to_string(), json!("1Gi"))).collect();
    assert!(mps_of(json!({"defaultPerDevicePinnedMemoryLimit": huge})).is_err());
    assert!(mps_of(json!({"defaultPerDevicePinnedMemoryLimit": "1Gi"})).is_err());
    assert!(mps_of(json!({"defaultPerDevicePinnedMemoryLimit": {"0": "lots"}})).is_err());
    let m = mps_of(json!({"defaultActiveThreadPercentage": 20, "perClientBurst": true}));
    assert_eq!(m.map(|m| m.ignored), Ok(vec!["perClientBurst".to_owned()]));
}

#[test]
fn quantities() {
    let ok = [
        ("10Gi", 10 * GIB),
        ("512Mi", 512 * MIB),
        ("1G", 1_000_000_000),
        ("1.5Gi", 1536 * MIB),
        ("1e3", 1000),
        ("1E3", 1000),
        ("+2k", 2000),
        ("100m", 1),
        ("0.5", 1),
        (".5Ki", 512),
        ("0", 0),
    ];
    for (s, want) in ok {
        assert_eq!(parse_quantity(s), Some(want), "{s}");
    }
    assert_eq!(parse_quantity("16Ei"), None, "above u64");
    for s in [
        "",
        "Gi",
        "1GiB",
        "1 Gi",
        "-5",
        "1.2.3",
        "1e",
        "0x10",
        "1Zi",
        &"9".repeat(65),
    ] {
        assert_eq!(parse_quantity(s), None, "{s:?}");
    }
    assert_eq!(parse_quantity("15Ei"), Some(15 << 60));
    assert_eq!(parse_quantity("1n"), Some(1));
    assert_eq!(parse_quantity("0.000n"), Some(0));
}

#[test]
fn precedence_follows_the_driver() {
    let devices = [
        dev("gpu-0", "gpu", Some(U0)),
        dev("gpu-0-mig-1g10gb-19-0", "mig", Some("MIG-1")),
    ];
    // Class config first, the claim's own config wins; a MIG device skips GpuConfigs that name
    // no request and takes the MigDeviceConfig.
    let claim = claim_json(
        json!([result("a", "gpu-0"), result("m", "gpu-0-mig-1g10gb-19-0")]),
        json!([
            from_claim(json!([]), mps(json!({"defaultActiveThreadPercentage": 30}))),
            {"source": "FromClass", "opaque": {"driver": "gpu.nvidia.com",
                "parameters": gpu_config(json!({"strategy": "TimeSlicing"}))}},
            from_claim(json!(["m"]), json!({"apiVersion": "resource.nvidia.com/v1beta1",
                "kind": "MigDeviceConfig", "sharing": {"strategy": "MPS"}})),
        ]),
    );
    let r = resolved(&claim, &devices);
    let gpu = r.iter().find(|(d, _)| d == "gpu-0").map(|(_, c)| c);
    assert_eq!(gpu.and_then(|c| c.thread_ratio), Some(0.3));
    let mig = r.iter().find(|(d, _)| d.contains("mig")).map(|(_, c)| c);
    assert_eq!(
        mig.map(|c| c.config.as_str()),
        Some("DRA MigDeviceConfig MPS")
    );
    assert_eq!(mig.and_then(|c| c.thread_ratio), None);

    // A later config naming no request beats an earlier one naming the request.
    let claim = claim_json(
        json!([result("a", "gpu-0")]),
        json!([
            from_claim(json!(["a"]), mps(json!({}))),
            from_claim(
                json!([]),
                gpu_config(json!({"strategy": "TimeSlicing",
                "timeSlicingConfig": {"interval": "Long"}}))
            ),
        ]),
    );
    let r = resolved(&claim, &devices);
    assert_eq!(r[0].1.strategy, Some(DeclaredStrategy::TimeSlicing));
    assert_eq!(r[0].1.config, "DRA GpuConfig TimeSlicing (Long)");

    // A GpuConfig naming a MIG device's request: the driver refuses, tessera says so.
    let claim = claim_json(
        json!([result("m", "gpu-0-mig-1g10gb-19-0")]),
        json!([from_claim(json!(["m"]), mps(json!({})))]),
    );
    let r = resolved(&claim, &devices);
    assert_eq!(r[0].1.strategy, None);
    assert!(r[0].1.notes[0].contains("GpuConfig names request \"m\" of a mig device"));

    // Unknown device type; another driver's device; no config at all.
    let claim = claim_json(
        json!([result("a", "gpu-9"), {"request": "n", "driver": "nic.example.com", "pool": "p", "device": "eth0"}]),
        json!([from_claim(json!([]), mps(json!({})))]),
    );
    let r = resolved(&claim, &devices);
    assert_eq!(r.len(), 1);
    assert!(r[0].1.notes[0].contains("type is not known"));
    let claim = claim_json(json!([result("a", "gpu-0")]), json!([]));
    assert!(resolved(&claim, &devices).is_empty());
}

#[test]
fn per_device_limits_by_index_or_uuid() {
    let devices = [
        dev("gpu-0", "gpu", Some(U1)),
        dev("gpu-1", "gpu", Some(U0)),
        dev("gpu-2", "gpu", None),
    ];
    let two = json!([result("a", "gpu-0"), result("a", "gpu-1")]);
    let with = |per: Value| {
        claim_json(
            two.clone(),
            json!([from_claim(
                json!([]),
                mps(json!({"defaultPinnedDeviceMemoryLimit": "4Gi",
                "defaultPerDevicePinnedMemoryLimit": per}))
            )]),
        )
    };
    let limit = |r: &[(String, DraDeviceConfig)], d: &str| {
        r.iter()
            .find(|(x, _)| x == d)
            .and_then(|(_, c)| c.memory_bytes)
    };
    // Index 0 is the smallest UUID (U0, on gpu-1), as the driver sorts them.
    let r = resolved(&with(json!({"0": "1Gi"})), &devices);
    assert_eq!(limit(&r, "gpu-1"), Some(GIB));
    assert_eq!(limit(&r, "gpu-0"), Some(4 * GIB));
    let r = resolved(&with(json!({U1: "2Gi"})), &devices);
    assert_eq!(limit(&r, "gpu-0"), Some(2 * GIB));
    assert_eq!(limit(&r, "gpu-1"), Some(4 * GIB));
    for bad in [
        json!({"2": "1Gi"}),
        json!({"GPU-nope": "1Gi"}),
        json!({"0": "1Gi", U0: "2Gi"}),
    ] {
        let r = resolved(&with(bad.clone()), &devices);
        assert_eq!(limit(&r, "gpu-1"), None, "{bad}");
    }
    let three = claim_json(
        json!([result("a", "gpu-0"), result("a", "gpu-2")]),
        json!([from_claim(
            json!([]),
            mps(json!({"defaultActiveThreadPercentage": 0,
            "defaultPerDevicePinnedMemoryLimit": {"1": "1Gi"}}))
        )]),
    );
    let r = resolved(&three, &devices);
    assert!(r
        .iter()
        .all(|(_, c)| c.memory_bytes.is_none() && c.thread_ratio.is_none()));
    assert!(r
        .iter()
        .all(|(_, c)| c.strategy == Some(DeclaredStrategy::Mps)));
    assert!(r[0].1.notes.iter().any(|n| n.contains("percentage 0")));
}

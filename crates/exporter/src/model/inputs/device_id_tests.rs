use super::*;
use proptest::prelude::*;
use DeviceRef::{GkeIndex, GkeMig, GpuUuid, LegacyMig, MigUuid, Unknown};

const G: &str = "GPU-ae19043d-ef40-d753-6928-d875dd5f2b07";
const M: &str = "MIG-5c89e5f3-9b9e-5e0c-9d4a-0c7e1f2b3a4d";

fn id(device: DeviceRef, replica: Option<u32>) -> DeviceId {
    DeviceId { device, replica }
}
fn gpu(s: &str) -> DeviceRef {
    GpuUuid(s.to_owned())
}
fn legacy(gi: u32, ci: u32) -> DeviceRef {
    LegacyMig {
        gpu_uuid: G.to_owned(),
        gpu_instance: gi,
        compute_instance: ci,
    }
}
fn gke(index: u32, vgpu: Option<u32>) -> DeviceRef {
    GkeIndex { index, vgpu }
}
fn unknown(s: &str) -> DeviceId {
    id(Unknown(s.to_owned()), None)
}

#[test]
fn device_id_forms() {
    let cases = [
        (G.to_owned(), id(gpu(G), None)),
        (format!("{G}::0"), id(gpu(G), Some(0))),
        (format!("{G}::15"), id(gpu(G), Some(15))),
        (M.to_owned(), id(MigUuid(M.to_owned()), None)),
        (format!("{M}::3"), id(MigUuid(M.to_owned()), Some(3))),
        (format!("MIG-{G}/7/0"), id(legacy(7, 0), None)),
        (format!("MIG-{G}/13/1::2"), id(legacy(13, 1), Some(2))),
        ("nvidia0".into(), id(gke(0, None), None)),
        ("nvidia7/vgpu3".into(), id(gke(7, Some(3)), None)),
        ("nvidia1/vgpu0::1".into(), id(gke(1, Some(0)), Some(1))),
        (
            "nvidia0/gi3".into(),
            id(
                GkeMig {
                    index: 0,
                    gpu_instance: 3,
                    vgpu: None,
                },
                None,
            ),
        ),
        (
            "nvidia2/gi9/vgpu1".into(),
            id(
                GkeMig {
                    index: 2,
                    gpu_instance: 9,
                    vgpu: Some(1),
                },
                None,
            ),
        ),
    ];
    for (raw, want) in cases {
        let got = parse_device_id(&raw);
        assert_eq!(got, want, "{raw}");
        assert_eq!(got.to_string(), raw, "{raw}");
    }
    // NVML prints lowercase; upper-case hex is accepted and lowered so the join still matches.
    assert_eq!(parse_device_id(&G.to_uppercase()), id(gpu(G), None));
    let mixed = format!("MIG-GPU-{}/1/0", &G[4..].to_uppercase());
    assert_eq!(parse_device_id(&mixed).to_string(), format!("MIG-{G}/1/0"));
}

/// `{u}` stands for a valid bare UUID, so each entry differs from a good ID in one way.
    #[rustfmt::skip]
    const ODD: &[&str] = &[
        "", "::", "::1", "GPU-", "MIG-", "gpu-{u}", "GPU-{u}0", "GPU-ae19043d-ef40-d753-6928-d875dd5f2b0",
        "GPU-ae19043d_ef40_d753_6928_d875dd5f2b07", "GPU-ae19043d-ef40-d753-6928-d875dd5f2bzz",
        "GPU-ae19043dxef40-d753-6928-d875dd5f2b07", "GPU-äe19043d-ef40-d753-6928-d875dd5f2b07",
        "GPU-{u}::", "GPU-{u}::x", "GPU-{u}::-1", "GPU-{u}::+1", "GPU-{u}::01", "GPU-{u}::1::2",
        "GPU-{u}::4294967296", " GPU-{u}", "GPU-{u} ", "MIG-GPU-{u}/x/y", "MIG-GPU-{u}/1",
        "MIG-GPU-{u}/1/2/3", "MIG-GPU-{u}//", "MIG-GPU-{u}/1/-2", "MIG-GPU-zz/1/2", "MIG-MIG-{u}",
        "nvidia", "nvidia-0", "nvidia01", "nvidia0/", "nvidia0/vgpu", "nvidia0/gpu1",
        "nvidia0/vgpu1/vgpu2", "nvidia0/gi", "nvidia0/gi1/", "nvidia0/vgpu1/gi1",
        "nvidia0/gi1/gi2", "nvidia0/gi01", "nvidia0/gi1/vgpu1/x", "nvidiactl", "0", "/dev/nvidia0", "GPU-🦀", "日本語",
    ];

#[test]
fn odd_device_ids_are_unknown() {
    let long = format!("{G}{}", "x".repeat(10_000));
    let odd = ODD.iter().map(|t| t.replace("{u}", &G[4..]));
    for raw in odd.chain([long]) {
        let got = parse_device_id(&raw);
        assert_eq!(got, unknown(&raw), "{raw:?}");
        assert_eq!(got.to_string(), raw);
    }
}

#[test]
fn helpers() {
    let bare = &G[4..];
    assert_eq!(parse_device_id(G).device.bare_uuid(), Some(bare));
    assert_eq!(parse_device_id(G).uuid(), Some(G));
    assert_eq!(parse_device_id(M).uuid(), Some(M));
    assert_eq!(parse_device_id(M).device.gpu_uuid(), None);
    assert!(parse_device_id(M).device.is_mig());
    let old = parse_device_id(&format!("MIG-{G}/1/0::4"));
    assert_eq!(old.device.gpu_uuid(), Some(G));
    assert_eq!(old.device.bare_uuid(), Some(bare));
    assert!(old.device.is_mig() && old.is_replica() && old.uuid().is_none());
    assert_eq!(parse_device_id("nvidia2").device.bare_uuid(), None);
    assert!(parse_device_id("nvidia2/gi1").device.is_mig());
    assert!(!parse_device_id("nvidia2/vgpu1").device.is_mig());
    assert!(!parse_device_id(G).is_replica());
}

#[test]
fn resource_names() {
    use ResourceKind::{Extra, Gpu};
    let mig = |p: &str, shared| {
        Some(ResourceKind::Mig {
            profile: p.to_owned(),
            shared,
        })
    };
    let m = ResourceMatcher::new(vec!["example.com/a100".into(), "nvidia.com/gpu".into()]);
    let cases = [
        ("nvidia.com/gpu", Some(Gpu { shared: false })),
        ("nvidia.com/gpu.shared", Some(Gpu { shared: true })),
        ("nvidia.com/mig-1g.10gb", mig("1g.10gb", false)),
        ("nvidia.com/mig-1g.5gb", mig("1g.5gb", false)),
        ("nvidia.com/mig-2g.20gb", mig("2g.20gb", false)),
        ("nvidia.com/mig-3g.40gb", mig("3g.40gb", false)),
        ("nvidia.com/mig-7g.80gb", mig("7g.80gb", false)),
        ("nvidia.com/mig-7g.141gb", mig("7g.141gb", false)),
        ("nvidia.com/mig-1g.10gb.me", mig("1g.10gb+me", false)),
        ("nvidia.com/mig-1g.10gb.shared", mig("1g.10gb", true)),
        ("nvidia.com/mig-1g.10gb.me.shared", mig("1g.10gb+me", true)),
        (
            "nvidia.com/mig-1g.24gb.me.all",
            mig("1g.24gb+me.all", false),
        ),
        ("nvidia.com/mig-1g.24gb-me", mig("1g.24gb-me", false)),
        ("nvidia.com/mig-1c.2g.20gb", mig("1c.2g.20gb", false)),
        ("example.com/a100", Some(Extra)),
        ("nvidia.com/gpumem", None),
        ("nvidia.com/gpucores", None),
        ("nvidia.com/gpu.sharedx", None),
        ("nvidia.com/gpu.shared.shared", None),
        ("nvidia.com/mig-", None),
        ("nvidia.com/mig-1g", None),
        ("nvidia.com/mig-1g.10", None),
        ("nvidia.com/mig-g.10gb", None),
        ("nvidia.com/mig-1g.10gb.", None),
        ("nvidia.com/mig-1g.10gb+me", None),
        ("nvidia.com/mig-1g.10gb.ME", None),
        ("nvidia.com/mig-1g.10gb.shared.shared", None),
        ("nvidia.com/mig-12345g.10gb", None),
        ("nvidia.com/mig.shared", None),
        ("nvidia.com/GPU", None),
        ("cpu", None),
        ("example.com/foo", None),
        ("example.com/a100.shared", None),
        ("", None),
    ];
    for (name, want) in cases {
        assert_eq!(m.classify(name), want, "{name}");
    }
    assert!(m
        .classify("nvidia.com/mig-1g.10gb.shared")
        .is_some_and(|k| k.is_shared()));
    assert!(!ResourceKind::Extra.is_shared());
    assert_eq!(
        ResourceMatcher::default().classify("example.com/a100"),
        None
    );
}

fn valid_id() -> impl Strategy<Value = String> {
    let uuid = "[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}";
    let base = prop_oneof![
        uuid.prop_map(|u| format!("GPU-{u}")),
        uuid.prop_map(|u| format!("MIG-{u}")),
        (uuid, any::<u32>(), any::<u32>()).prop_map(|(u, g, c)| format!("MIG-GPU-{u}/{g}/{c}")),
        any::<u32>().prop_map(|i| format!("nvidia{i}")),
        (any::<u32>(), any::<u32>()).prop_map(|(i, v)| format!("nvidia{i}/vgpu{v}")),
        (
            any::<u32>(),
            any::<u32>(),
            proptest::option::of(any::<u32>())
        )
            .prop_map(|(i, g, v)| {
                format!(
                    "nvidia{i}/gi{g}{}",
                    v.map(|v| format!("/vgpu{v}")).unwrap_or_default()
                )
            }),
    ];
    (base, proptest::option::of(any::<u32>())).prop_map(|(b, r)| match r {
        Some(r) => format!("{b}::{r}"),
        None => b,
    })
}

proptest! {
    #[test]
    fn never_panics(s in any::<String>()) {
        let _ = parse_device_id(&s);
        let _ = ResourceMatcher::new(vec![s.clone()]).classify(&s);
    }

    #[test]
    fn valid_ids_round_trip(raw in valid_id()) {
        let parsed = parse_device_id(&raw);
        prop_assert!(!matches!(parsed.device, Unknown(_)), "{}", raw);
        prop_assert_eq!(parsed.to_string(), raw);
    }

    #[test]
    fn parse_is_idempotent(raw in "(GPU-|MIG-|MIG-GPU-|nvidia)?[0-9a-fA-F/:vgpu-]{0,48}") {
        let once = parse_device_id(&raw);
        prop_assert_eq!(parse_device_id(&once.to_string()), once);
    }

    #[test]
    fn mig_resource_names_round_trip(
        core in "([1-9]c\\.)?[1-7]g\\.[1-9][0-9]{0,2}gb",
        attrs in proptest::collection::vec("[a-z][a-z0-9]{0,5}", 0..3),
        shared in any::<bool>(),
    ) {
        prop_assume!(!attrs.iter().any(|a| a == "shared"));
        let dotted: String = attrs.iter().map(|a| format!(".{a}")).collect();
        let name = format!("nvidia.com/mig-{core}{dotted}{}", if shared { ".shared" } else { "" });
        let profile = if attrs.is_empty() { core } else { format!("{core}+{}", attrs.join(".")) };
        prop_assert_eq!(ResourceMatcher::default().classify(&name), Some(ResourceKind::Mig { profile, shared }));
    }
}

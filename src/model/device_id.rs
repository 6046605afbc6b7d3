//! Device-plugin device IDs and extended-resource names, as the kubelet pod-resources API
//! reports them.
//!
//! Device IDs handled by [`parse_device_id`]:
//!
//! * `GPU-<uuid>` — a whole GPU (NVIDIA device plugin, `nvidia.com/gpu`);
//! * `MIG-<uuid>` — a MIG device (driver R470 and later);
//! * `MIG-GPU-<uuid>/<gi>/<ci>` — a MIG device before R470 (GPU UUID, GPU and compute instance);
//! * `nvidia<N>`, `nvidia<N>/vgpu<K>` — GKE's device plugin (minor number, time-shared slot),
//!   and its MIG partitions `nvidia<N>/gi<G>[/vgpu<K>]` (GPU instance ID);
//! * any of those with a `::<n>` replica suffix: time-slicing and MPS both expose each device
//!   `replicas` times this way, so the suffix alone does not say which one is in use.
//!
//! UUIDs are 8-4-4-4-12 hex after an upper-case `GPU-`/`MIG-` prefix; hex of either case is
//! accepted and lowered, because NVML prints lowercase and the join compares strings. Numbers are
//! plain decimals without sign or leading zeros. Anything else, including a malformed replica
//! suffix, becomes [`DeviceRef::Unknown`] holding the whole raw ID, so it is still reported
//! instead of silently dropped or half-parsed.
//!
//! Resource names handled by [`ResourceMatcher`] (by pattern, never a fixed list):
//! `nvidia.com/gpu`, `nvidia.com/mig-<profile>`, each optionally with the `.shared` suffix of
//! `renameByDefault`. A profile is `[<c>c.]<g>g.<mem>gb` plus attributes; the device plugin
//! writes NVML's `+` as `.` (`1g.10gb+me` → `mig-1g.10gb.me`), which is mapped back. Exact extra
//! names from configuration classify as [`ResourceKind::Extra`].

use std::fmt;

/// Which device one device-plugin ID names.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum DeviceRef {
    /// `GPU-<uuid>`, prefix kept so it equals NVML's UUID string.
    GpuUuid(String),
    /// `MIG-<uuid>`, prefix kept so it equals NVML's MIG device UUID string.
    MigUuid(String),
    /// `MIG-GPU-<uuid>/<gi>/<ci>`; `gpu_uuid` keeps its `GPU-` prefix.
    LegacyMig {
        gpu_uuid: String,
        gpu_instance: u32,
        compute_instance: u32,
    },
    /// GKE `nvidia<index>[/vgpu<slot>]`; the index is the device minor number (`/dev/nvidia<N>`).
    GkeIndex { index: u32, vgpu: Option<u32> },
    /// GKE MIG partition `nvidia<index>/gi<gpu_instance>[/vgpu<slot>]`.
    GkeMig {
        index: u32,
        gpu_instance: u32,
        vgpu: Option<u32>,
    },
    /// Anything unrecognised, verbatim (replica suffix included).
    Unknown(String),
}

impl DeviceRef {
    /// The UUID as NVML prints it (`GPU-…` or `MIG-…`) for devices named by UUID.
    pub fn uuid(&self) -> Option<&str> {
        match self {
            Self::GpuUuid(u) | Self::MigUuid(u) => Some(u),
            _ => None,
        }
    }

    /// The UUID without its `GPU-`/`MIG-` prefix; for a legacy MIG ID, its GPU's.
    pub fn bare_uuid(&self) -> Option<&str> {
        match self {
            Self::GpuUuid(u) | Self::MigUuid(u) => u.get(4..),
            Self::LegacyMig { gpu_uuid, .. } => gpu_uuid.get(4..),
            _ => None,
        }
    }

    /// The physical GPU's `GPU-…` UUID when the ID itself names it (a `MIG-<uuid>` needs NVML
    /// to find its parent).
    pub fn gpu_uuid(&self) -> Option<&str> {
        match self {
            Self::GpuUuid(u) | Self::LegacyMig { gpu_uuid: u, .. } => Some(u),
            _ => None,
        }
    }

    pub fn is_mig(&self) -> bool {
        matches!(
            self,
            Self::MigUuid(_) | Self::LegacyMig { .. } | Self::GkeMig { .. }
        )
    }
}

impl fmt::Display for DeviceRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::GpuUuid(s) | Self::MigUuid(s) | Self::Unknown(s) => f.write_str(s),
            Self::LegacyMig {
                gpu_uuid,
                gpu_instance,
                compute_instance,
            } => write!(f, "MIG-{gpu_uuid}/{gpu_instance}/{compute_instance}"),
            Self::GkeIndex { index, vgpu } => {
                write!(f, "nvidia{index}")?;
                vgpu.map_or(Ok(()), |v| write!(f, "/vgpu{v}"))
            }
            Self::GkeMig {
                index,
                gpu_instance,
                vgpu,
            } => {
                write!(f, "nvidia{index}/gi{gpu_instance}")?;
                vgpu.map_or(Ok(()), |v| write!(f, "/vgpu{v}"))
            }
        }
    }
}

/// A parsed device-plugin device ID: the device and, when shared, which replica of it.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct DeviceId {
    pub device: DeviceRef,
    pub replica: Option<u32>,
}

impl DeviceId {
    /// A `::<n>` suffix means the plugin offers the device to several containers.
    pub fn is_replica(&self) -> bool {
        self.replica.is_some()
    }

    /// See [`DeviceRef::uuid`].
    pub fn uuid(&self) -> Option<&str> {
        self.device.uuid()
    }
}

impl fmt::Display for DeviceId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.replica {
            Some(n) => write!(f, "{}::{n}", self.device),
            None => write!(f, "{}", self.device),
        }
    }
}

/// Parses one device ID from pod-resources. Never fails: unrecognised IDs become
/// [`DeviceRef::Unknown`] with no replica.
pub fn parse_device_id(raw: &str) -> DeviceId {
    let parsed = match raw.split_once("::") {
        Some((base, n)) => decimal(n).and_then(|n| Some((device_ref(base)?, Some(n)))),
        None => device_ref(raw).map(|d| (d, None)),
    };
    match parsed {
        Some((device, replica)) => DeviceId { device, replica },
        None => DeviceId {
            device: DeviceRef::Unknown(raw.to_owned()),
            replica: None,
        },
    }
}

fn device_ref(s: &str) -> Option<DeviceRef> {
    // Checked before `MIG-`: the legacy form would otherwise fail UUID validation as `MIG-GPU-…`.
    if let Some(rest) = s.strip_prefix("MIG-GPU-") {
        let mut parts = rest.split('/');
        let gpu_uuid = format!("GPU-{}", uuid(parts.next()?)?);
        let gpu_instance = decimal(parts.next()?)?;
        let compute_instance = decimal(parts.next()?)?;
        return parts.next().is_none().then_some(DeviceRef::LegacyMig {
            gpu_uuid,
            gpu_instance,
            compute_instance,
        });
    }
    if let Some(u) = s.strip_prefix("GPU-") {
        return Some(DeviceRef::GpuUuid(format!("GPU-{}", uuid(u)?)));
    }
    if let Some(u) = s.strip_prefix("MIG-") {
        return Some(DeviceRef::MigUuid(format!("MIG-{}", uuid(u)?)));
    }
    let mut parts = s.strip_prefix("nvidia")?.split('/');
    let index = decimal(parts.next()?)?;
    let mut next = parts.next();
    let gpu_instance = match next.and_then(|p| p.strip_prefix("gi")) {
        Some(gi) => {
            next = parts.next();
            Some(decimal(gi)?)
        }
        None => None,
    };
    let vgpu = match next {
        Some(slot) => Some(decimal(slot.strip_prefix("vgpu")?)?),
        None => None,
    };
    if parts.next().is_some() {
        return None;
    }
    Some(match gpu_instance {
        Some(gpu_instance) => DeviceRef::GkeMig {
            index,
            gpu_instance,
            vgpu,
        },
        None => DeviceRef::GkeIndex { index, vgpu },
    })
}

/// 8-4-4-4-12 hex digits, lowered.
fn uuid(s: &str) -> Option<String> {
    let b = s.as_bytes();
    let well_formed = b.len() == 36
        && b.iter().enumerate().all(|(i, c)| match i {
            8 | 13 | 18 | 23 => *c == b'-',
            _ => c.is_ascii_hexdigit(),
        });
    well_formed.then(|| s.to_ascii_lowercase())
}

/// Unsigned decimal without sign or leading zeros, so that formatting gives back the input.
fn decimal(s: &str) -> Option<u32> {
    let canonical =
        !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit()) && (s == "0" || !s.starts_with('0'));
    canonical.then(|| s.parse().ok()).flatten()
}

/// What a resource name says about the devices allocated under it.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum ResourceKind {
    /// `nvidia.com/gpu`, or `nvidia.com/gpu.shared` when renamed for sharing.
    Gpu { shared: bool },
    /// `nvidia.com/mig-<profile>[.shared]`; `profile` in NVML spelling (`1g.10gb+me`).
    Mig { profile: String, shared: bool },
    /// A name configured with `--kubelet.resource-name`.
    Extra,
}

impl ResourceKind {
    /// Only the `.shared` rename says so; a non-renamed shared resource looks exclusive here.
    pub fn is_shared(&self) -> bool {
        matches!(
            self,
            Self::Gpu { shared: true } | Self::Mig { shared: true, .. }
        )
    }
}

/// Recognises GPU resource names by pattern plus configured extras.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ResourceMatcher {
    extra: Vec<String>,
}

impl ResourceMatcher {
    pub fn new(extra: Vec<String>) -> Self {
        Self { extra }
    }

    /// `None` for resources that are not GPUs (`cpu`, `nvidia.com/gpumem`, …). A configured
    /// extra that also fits a pattern classifies by the pattern, which says more.
    pub fn classify(&self, resource_name: &str) -> Option<ResourceKind> {
        if let Some(kind) = nvidia_resource(resource_name) {
            return Some(kind);
        }
        self.extra
            .iter()
            .any(|e| e == resource_name)
            .then_some(ResourceKind::Extra)
    }
}

fn nvidia_resource(name: &str) -> Option<ResourceKind> {
    let rest = name.strip_prefix("nvidia.com/")?;
    let (rest, shared) = match rest.strip_suffix(".shared") {
        Some(r) => (r, true),
        None => (rest, false),
    };
    if rest == "gpu" {
        return Some(ResourceKind::Gpu { shared });
    }
    let profile = mig_profile(rest.strip_prefix("mig-")?)?;
    Some(ResourceKind::Mig { profile, shared })
}

/// Resource-name profile (`[<c>c.]<g>g.<mem>gb[-attr][.attr…]`) → NVML spelling: the first `.`
/// after the memory size is NVML's `+` (`1g.10gb.me` → `1g.10gb+me`, `1g.24gb.me.all` →
/// `1g.24gb+me.all`).
fn mig_profile(s: &str) -> Option<String> {
    let mut tokens = s.split('.');
    let mut first = tokens.next()?;
    let mut out = String::with_capacity(s.len() + 1);
    if let Some(c) = first.strip_suffix('c') {
        small_number(c)?;
        out.push_str(first);
        out.push('.');
        first = tokens.next()?;
    }
    small_number(first.strip_suffix('g')?)?;
    out.push_str(first);
    let mem = tokens.next()?;
    let mut mem_parts = mem.split('-');
    small_number(mem_parts.next()?.strip_suffix("gb")?)?;
    if !mem_parts.all(attribute) {
        return None;
    }
    out.push('.');
    out.push_str(mem);
    for (i, attr) in tokens.enumerate() {
        if !attribute(attr) || attr == "shared" {
            return None;
        }
        out.push(if i == 0 { '+' } else { '.' });
        out.push_str(attr);
    }
    Some(out)
}

fn small_number(s: &str) -> Option<()> {
    ((1..=4).contains(&s.len()) && s.bytes().all(|b| b.is_ascii_digit())).then_some(())
}

fn attribute(s: &str) -> bool {
    (1..=16).contains(&s.len())
        && s.starts_with(|c: char| c.is_ascii_lowercase())
        && s.bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit())
}

#[cfg(test)]
mod tests {
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
}

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
#[path = "device_id_tests.rs"]
mod tests;

//! Fractional GPU schedulers and MPS client limits, as a pod's own metadata declares them.
//!
//! HAMi and Volcano's vGPU pick the physical GPU themselves and write it, with the memory and
//! cores each container may use, into a pod annotation; the device IDs the kubelet reports for
//! them are placeholders. KAI (Run:ai) gives fraction pods no device at all: a reservation pod
//! in its own namespace holds the GPU and the fraction pods point at it through a GPU-group
//! label. MPS clients may lower their limits through two environment variables. The formats
//! and where they are documented are in docs/sharing-systems.md. Pure: strings in, plain data
//! out; a malformed value is ignored rather than guessed.

use std::collections::BTreeMap;

use serde::Serialize;

/// HAMi: one entry per container (init containers first, in recent releases), each a list of
/// `<uuid>,<type>,<memory MiB>,<cores %>:` devices, every entry ending in `;`.
pub const HAMI_ALLOCATED: &str = "hami.io/vgpu-devices-allocated";
/// Volcano vGPU: the same device syntax, one entry per regular container, joined by `;`.
pub const VOLCANO_ALLOCATED: &str = "volcano.sh/vgpu-ids-new";
/// KAI / Run:ai: the share of one GPU's memory a fraction pod may use (`0.5`).
pub const KAI_FRACTION: &str = "gpu-fraction";
/// KAI / Run:ai: GPU memory in MiB instead of a fraction (`2000`).
pub const KAI_MEMORY: &str = "gpu-memory";
/// KAI: how many GPUs a multi-device fraction pod gets the fraction of.
pub const KAI_NUM_DEVICES: &str = "gpu-fraction-num-devices";
/// KAI: which container the fraction is for (the first regular container otherwise).
pub const KAI_CONTAINER: &str = "gpu-fraction-container-name";
/// KAI: on a reservation pod, the UUID of the GPU it reserved.
pub const KAI_RESERVED_GPU: &str = "run.ai/reserve_for_gpu_index";
/// KAI: label tying fraction pods to their reservation pod (`runai-gpu-group/<g>` when multi).
pub const KAI_GROUP_LABEL: &str = "runai-gpu-group";
/// Namespaces KAI (`kai-resource-reservation`) and Run:ai (`runai-reservation`) put
/// reservation pods in.
pub const KAI_RESERVATION_NAMESPACES: [&str; 2] = ["kai-resource-reservation", "runai-reservation"];
/// Volcano's vGPU count resource; its device IDs are placeholders like HAMi's.
pub const VOLCANO_RESOURCE: &str = "volcano.sh/vgpu-number";

pub const MPS_THREADS_ENV: &str = "CUDA_MPS_ACTIVE_THREAD_PERCENTAGE";
pub const MPS_MEMORY_ENV: &str = "CUDA_MPS_PINNED_DEVICE_MEM_LIMIT";

/// Annotations the pod reflector must keep for this module.
pub const ANNOTATIONS: [&str; 6] = [
    HAMI_ALLOCATED,
    VOLCANO_ALLOCATED,
    KAI_FRACTION,
    KAI_MEMORY,
    KAI_NUM_DEVICES,
    KAI_CONTAINER,
];

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
pub enum Scheduler {
    #[serde(rename = "hami")]
    Hami,
    #[serde(rename = "volcano-vgpu")]
    Volcano,
    #[serde(rename = "kai")]
    Kai,
}

impl Scheduler {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Hami => "hami",
            Self::Volcano => "volcano-vgpu",
            Self::Kai => "kai",
        }
    }
}

/// One GPU a fractional scheduler gave one container, and the limits that come with it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Grant {
    pub scheduler: Scheduler,
    pub container: String,
    /// `GPU-<uuid>` as the scheduler wrote it; `None` for KAI until its reservation is found.
    pub uuid: Option<String>,
    pub memory_bytes: Option<u64>,
    /// KAI's `gpu-fraction`: a share of the device's memory, resolved once the device is known.
    pub memory_fraction: Option<f64>,
    /// Share of the GPU's SMs (HAMi's cores percentage / 100); `None` when not limited.
    pub compute_ratio: Option<f64>,
}

/// A KAI reservation pod: the placeholder that holds a GPU for a group of fraction pods.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Reservation {
    pub group: String,
    /// From its annotation; absent until KAI patched it (its kubelet allocation still says).
    pub uuid: Option<String>,
}

/// MPS limits one container sets for itself.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct MpsEnv {
    pub container: String,
    pub thread_ratio: Option<f64>,
    /// Per CUDA device ordinal; ordinal `None` is a value without `N=` that applies to all.
    pub pinned_memory: Vec<(Option<u32>, u64)>,
}

/// Everything sharing-related a pod's metadata says.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct PodSharing {
    pub grants: Vec<Grant>,
    /// KAI GPU groups a fraction pod belongs to, in label order.
    pub kai_groups: Vec<String>,
    pub reservation: Option<Reservation>,
    pub mps: Vec<MpsEnv>,
}

// Every float here passed a range check that NaN fails, so equality is reflexive.
impl Eq for Grant {}
impl Eq for MpsEnv {}
impl Eq for PodSharing {}

/// The parts of a pod this module reads, borrowed from wherever the pod came from.
#[derive(Debug, Default)]
pub struct PodParts<'a> {
    pub namespace: &'a str,
    pub annotations: Option<&'a BTreeMap<String, String>>,
    pub labels: Option<&'a BTreeMap<String, String>>,
    pub init_containers: Vec<&'a str>,
    pub containers: Vec<&'a str>,
    /// Literal `env` values per container (values from references are not known here).
    pub env: Vec<(&'a str, Vec<(&'a str, &'a str)>)>,
}

const MIB: u64 = 1024 * 1024;

impl PodSharing {
    pub fn from_parts(p: &PodParts<'_>) -> Self {
        let ann = |k: &str| p.annotations.and_then(|a| a.get(k)).map(String::as_str);
        let mut grants = Vec::new();
        if let Some(v) = ann(HAMI_ALLOCATED) {
            grants.extend(device_list(Scheduler::Hami, v, p));
        }
        if let Some(v) = ann(VOLCANO_ALLOCATED) {
            grants.extend(device_list(Scheduler::Volcano, v, p));
        }
        let kai_groups: Vec<String> = p
            .labels
            .into_iter()
            .flatten()
            .filter(|(k, _)| {
                k.as_str() == KAI_GROUP_LABEL
                    || k.strip_prefix(KAI_GROUP_LABEL)
                        .is_some_and(|r| r.starts_with('/'))
            })
            .map(|(_, v)| v.clone())
            .filter(|v| !v.is_empty())
            .collect();
        let reservation = KAI_RESERVATION_NAMESPACES
            .contains(&p.namespace)
            .then(|| kai_groups.first().cloned())
            .flatten()
            .map(|group| Reservation {
                group,
                uuid: p
                    .annotations
                    .and_then(|a| a.get(KAI_RESERVED_GPU))
                    .filter(|u| u.starts_with("GPU-"))
                    .cloned(),
            });
        if reservation.is_none() {
            grants.extend(kai_grants(p, &ann));
        }
        let mps = p
            .env
            .iter()
            .filter_map(|(container, vars)| mps_env(container, vars))
            .collect();
        Self {
            grants,
            kai_groups: if reservation.is_some() {
                Vec::new()
            } else {
                kai_groups
            },
            reservation,
            mps,
        }
    }

    pub fn is_empty(&self) -> bool {
        self.grants.is_empty() && self.reservation.is_none() && self.mps.is_empty()
    }

    pub fn grants_for<'a>(&'a self, container: &'a str) -> impl Iterator<Item = &'a Grant> + 'a {
        self.grants.iter().filter(move |g| g.container == container)
    }

    pub fn mps_for(&self, container: &str) -> Option<&MpsEnv> {
        self.mps.iter().find(|m| m.container == container)
    }
}

/// HAMi's and Volcano's per-container device lists. Entries map to init then regular
/// containers when there is one per container of both kinds, else to regular containers
/// (Volcano, and HAMi before it counted init containers).
fn device_list(scheduler: Scheduler, value: &str, p: &PodParts<'_>) -> Vec<Grant> {
    let value = value.strip_suffix(';').unwrap_or(value);
    let entries: Vec<&str> = value.split(';').collect();
    let names: Vec<&str> = if !p.init_containers.is_empty()
        && entries.len() == p.init_containers.len() + p.containers.len()
    {
        p.init_containers
            .iter()
            .chain(&p.containers)
            .copied()
            .collect()
    } else {
        p.containers.clone()
    };
    let mut out = Vec::new();
    for (entry, name) in entries.iter().zip(names) {
        for dev in entry.split(':').filter(|d| !d.is_empty()) {
            let mut f = dev.split(',');
            let (Some(uuid), Some(_kind), Some(mem), Some(cores)) =
                (f.next(), f.next(), f.next(), f.next())
            else {
                continue;
            };
            let (Ok(mem), Ok(cores)) = (mem.trim().parse::<u64>(), cores.trim().parse::<u32>())
            else {
                continue;
            };
            if !uuid.starts_with("GPU-") {
                continue;
            }
            out.push(Grant {
                scheduler,
                container: name.to_owned(),
                uuid: Some(uuid.to_owned()),
                // 0 MiB is not a real grant: the interposer treats it as "no limit".
                memory_bytes: (mem > 0).then(|| mem.saturating_mul(MIB)),
                memory_fraction: None,
                // 0 % means the interposer does not throttle; above 100 is not a share.
                compute_ratio: (1..=100).contains(&cores).then(|| f64::from(cores) / 100.0),
            });
        }
    }
    out
}

fn kai_grants<'a>(p: &PodParts<'a>, ann: &dyn Fn(&str) -> Option<&'a str>) -> Vec<Grant> {
    let fraction = ann(KAI_FRACTION)
        .and_then(|v| v.trim().parse::<f64>().ok())
        .filter(|f| *f > 0.0 && *f <= 1.0);
    let memory = ann(KAI_MEMORY)
        .and_then(|v| v.trim().parse::<u64>().ok())
        .filter(|m| *m > 0);
    if fraction.is_none() && memory.is_none() {
        return Vec::new();
    }
    let container = match ann(KAI_CONTAINER) {
        Some(name) => name,
        None => match p.containers.first() {
            Some(c) => c,
            None => return Vec::new(),
        },
    };
    let devices = ann(KAI_NUM_DEVICES)
        .and_then(|v| v.trim().parse::<u32>().ok())
        .unwrap_or(1)
        .clamp(1, 64);
    (0..devices)
        .map(|_| Grant {
            scheduler: Scheduler::Kai,
            container: container.to_owned(),
            uuid: None,
            memory_bytes: memory.map(|m| m.saturating_mul(MIB)),
            memory_fraction: fraction,
            compute_ratio: None,
        })
        .collect()
}

fn mps_env(container: &str, vars: &[(&str, &str)]) -> Option<MpsEnv> {
    let get = |k: &str| vars.iter().rev().find(|(n, _)| *n == k).map(|(_, v)| *v);
    let thread_ratio = get(MPS_THREADS_ENV)
        .and_then(|v| v.trim().parse::<f64>().ok())
        .filter(|p| *p > 0.0 && *p <= 100.0)
        .map(|p| p / 100.0);
    let pinned_memory = get(MPS_MEMORY_ENV)
        .map(parse_pinned_memory)
        .unwrap_or_default();
    (thread_ratio.is_some() || !pinned_memory.is_empty()).then(|| MpsEnv {
        container: container.to_owned(),
        thread_ratio,
        pinned_memory,
    })
}

/// `0=500M,1=2G` (a value without `N=` applies to every device); entries that do not parse
/// are left out.
pub fn parse_pinned_memory(v: &str) -> Vec<(Option<u32>, u64)> {
    v.split(',')
        .map(str::trim)
        .filter(|e| !e.is_empty())
        .filter_map(|e| match e.split_once('=') {
            Some((ord, size)) => Some((Some(ord.trim().parse().ok()?), parse_size(size)?)),
            None => Some((None, parse_size(e)?)),
        })
        .collect()
}

/// A size with an optional binary `K`/`M`/`G`/`T` suffix (`500M`, `2G`, `1024`).
pub fn parse_size(s: &str) -> Option<u64> {
    let s = s.trim();
    let (digits, unit) = match s.char_indices().find(|(_, c)| !c.is_ascii_digit()) {
        Some((i, _)) => (&s[..i], s[i..].trim_end_matches(['B', 'b', 'i'])),
        None => (s, ""),
    };
    let n: u64 = digits.parse().ok()?;
    let mult: u64 = match unit.to_ascii_uppercase().as_str() {
        "" => 1,
        "K" => 1 << 10,
        "M" => 1 << 20,
        "G" => 1 << 30,
        "T" => 1 << 40,
        _ => return None,
    };
    n.checked_mul(mult).filter(|b| *b > 0)
}

/// HAMi's device plugin offers each GPU `deviceSplitCount` times as `GPU-<uuid>-<n>`: the
/// GPU's UUID and the replica number, or `None` for any other form.
pub fn split_placeholder_id(raw: &str) -> Option<(&str, u32)> {
    let (uuid, n) = raw.rsplit_once('-')?;
    let well_formed = uuid.len() == 40
        && uuid.starts_with("GPU-")
        && !n.is_empty()
        && n.len() <= 4
        && n.bytes().all(|b| b.is_ascii_digit());
    well_formed.then(|| Some((uuid, n.parse().ok()?))).flatten()
}

#[cfg(test)]
#[path = "fractional_tests.rs"]
mod tests;

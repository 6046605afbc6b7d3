//! DRA ResourceClaims and what their NVIDIA `GpuConfig` / `MigDeviceConfig` says about sharing
//! each allocated device: the strategy (MPS or time-slicing) and MPS's per-client limits.
//! The kube source reads claims into [`DraClaim`] (`dra_parse`); [`resolve`] applies the
//! driver's precedence once the devices' UUIDs are known from ResourceSlices. Pure.

pub mod dra_claim;
mod dra_parse;

use std::collections::BTreeMap;

use self::dra_claim::{
    ClaimResult, DeviceKey, DraClaim, DraDevice, DraDeviceConfig, MpsConfig, SharingConfig,
};
use super::sharing::DeclaredStrategy;

pub use self::dra_parse::{claim_from_json, parse_quantity, NVIDIA_DRIVER};

/// What each of the claim's NVIDIA devices is configured with, following the driver
/// (`prepareDevices`): the last config in precedence order that names the device's request,
/// or names no request and fits the device's type, governs it. Devices no config governs get
/// the driver's built-in default, which depends on its feature gates: nothing is said of them.
pub fn resolve<'a>(
    claim: &DraClaim,
    device: impl Fn(&str, &str, &str) -> Option<&'a DraDevice>,
) -> Vec<(DeviceKey, DraDeviceConfig)> {
    let claim_ref = format!("{}/{}", claim.namespace, claim.name);
    let mut governed: BTreeMap<usize, Vec<usize>> = BTreeMap::new();
    let mut out: Vec<(DeviceKey, DraDeviceConfig)> = Vec::new();
    for (i, r) in claim.results.iter().enumerate() {
        if r.driver != NVIDIA_DRIVER {
            continue;
        }
        let kind = device(&r.driver, &r.pool, &r.device).and_then(|d| d.kind.as_deref());
        let mut unknown = |why: String| {
            let mut notes = claim.notes.clone();
            notes.push(why);
            out.push((
                key(r),
                DraDeviceConfig {
                    claim: claim_ref.clone(),
                    request: r.request.clone(),
                    config: "DRA config".into(),
                    strategy: None,
                    thread_ratio: None,
                    memory_bytes: None,
                    notes,
                },
            ));
        };
        for (c_idx, c) in claim.configs.iter().enumerate().rev() {
            let named = c.requests.contains(&r.request);
            if !named && !c.requests.is_empty() {
                continue;
            }
            match kind {
                Some(t) if c.kind.fits(t) => {
                    governed.entry(c_idx).or_default().push(i);
                }
                // The driver refuses to prepare such a claim; a pod running with it is not ours
                // to explain.
                Some(t) if named => unknown(format!(
                    "a {} names request {:?} of a {t} device",
                    c.kind.name(),
                    r.request
                )),
                Some(_) => continue,
                None => unknown("the device's type is not known from its ResourceSlice".into()),
            }
            break;
        }
    }
    for (c_idx, results) in governed {
        let Some(c) = claim.configs.get(c_idx) else {
            continue;
        };
        let uuids: Vec<Option<&str>> = results
            .iter()
            .filter_map(|i| claim.results.get(*i))
            .map(|r| device(&r.driver, &r.pool, &r.device).and_then(|d| d.uuid.as_deref()))
            .collect();
        for (n, i) in results.iter().enumerate() {
            let Some(r) = claim.results.get(*i) else {
                continue;
            };
            let mut cfg = DraDeviceConfig {
                claim: claim_ref.clone(),
                request: r.request.clone(),
                config: format!("DRA {}", c.kind.name()),
                strategy: None,
                thread_ratio: None,
                memory_bytes: None,
                notes: claim.notes.clone(),
            };
            match &c.sharing {
                Err(why) => cfg.notes.push(format!("config ignored: {why}")),
                Ok(None) => cfg.notes.push("the config sets no sharing strategy".into()),
                Ok(Some(SharingConfig::TimeSlicing { interval })) => {
                    cfg.config.push_str(" TimeSlicing");
                    if let Some(i) = interval {
                        cfg.config.push_str(&format!(" ({i})"));
                    }
                    cfg.strategy = Some(DeclaredStrategy::TimeSlicing);
                }
                Ok(Some(SharingConfig::Mps(m))) => {
                    cfg.config.push_str(" MPS");
                    cfg.strategy = Some(DeclaredStrategy::Mps);
                    apply_mps(&mut cfg, m, &uuids, n);
                }
            }
            out.push((key(r), cfg));
        }
    }
    out
}

fn key(r: &ClaimResult) -> DeviceKey {
    (r.driver.clone(), r.pool.clone(), r.device.clone())
}

/// MPS limits of device `n` of the config's group. The driver keys per-device limits by UUID
/// or by index into the group's UUIDs sorted as strings, and fails the claim on a key that is
/// neither, so such a map means the limits cannot be known.
fn apply_mps(cfg: &mut DraDeviceConfig, m: &MpsConfig, uuids: &[Option<&str>], n: usize) {
    for f in &m.ignored {
        cfg.notes
            .push(format!("unknown mpsConfig field {f:?} ignored"));
    }
    cfg.thread_ratio = match m.thread_percentage {
        // Passed to MPS as is, but 0 % is no share tessera can state as a limit.
        Some(0) => {
            cfg.notes
                .push("active thread percentage 0 is not exported as a limit".into());
            None
        }
        Some(p) => Some(f64::from(p) / 100.0),
        None => None,
    };
    cfg.memory_bytes = m.default_pinned_bytes;
    if m.per_device_pinned.is_empty() {
        return;
    }
    let Some(mine) = uuids.get(n).copied().flatten() else {
        cfg.memory_bytes = None;
        cfg.notes
            .push("per-device pinned memory limits, and the device's UUID is not known".into());
        return;
    };
    let mut sorted: Vec<Option<&str>> = uuids.to_vec();
    sorted.sort_unstable();
    let all_known = sorted.iter().all(Option::is_some);
    let mut found = None;
    for (k, bytes) in &m.per_device_pinned {
        let target = if uuids.contains(&Some(k.as_str())) {
            Some(k.as_str())
        } else {
            match k.parse::<usize>() {
                Ok(i) if i < sorted.len() && all_known => sorted[i],
                Ok(i) if i < sorted.len() => {
                    cfg.memory_bytes = None;
                    cfg.notes.push(format!(
                        "per-device pinned memory limit {k:?}: the group's UUIDs are not all known"
                    ));
                    return;
                }
                _ => {
                    cfg.memory_bytes = None;
                    cfg.notes.push(format!(
                        "per-device pinned memory limit {k:?} names no device of the claim"
                    ));
                    return;
                }
            }
        };
        // Later map entries win in the driver, but Go's map order is random: two keys naming
        // one device leave the value unknowable.
        if target == Some(mine) {
            if found.is_some_and(|b| b != *bytes) {
                cfg.memory_bytes = None;
                cfg.notes
                    .push("two per-device pinned memory limits name this device".into());
                return;
            }
            found = Some(*bytes);
        }
    }
    if let Some(b) = found {
        cfg.memory_bytes = Some(b);
    }
}

#[cfg(test)]
mod tests;

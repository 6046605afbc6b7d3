//! A ResourceClaim's allocation, and the NVIDIA DRA driver's opaque `GpuConfig` /
//! `MigDeviceConfig` parameters in it, read from JSON into [`DraClaim`]. The claim JSON is the
//! same in `resource.k8s.io/v1` and `v1beta1` for the parts read here. Pure.
//!
//! Anything malformed is kept as a reason, never guessed: a config tessera cannot read still
//! takes its place in the driver's precedence, so the devices it governs read "unknown"
//! rather than falling through to a weaker config. The facts this follows (field names, the
//! driver's precedence and checks) are in docs/sharing-systems.md.

use serde_json::{Map, Value};

use super::dra_claim::{ClaimConfig, ClaimResult, ConfigKind, DraClaim, MpsConfig, SharingConfig};

/// The driver whose opaque configs tessera reads (the NVIDIA DRA driver's GPU plugin).
pub const NVIDIA_DRIVER: &str = "gpu.nvidia.com";
/// The only config API the driver serves (`api/nvidia.com/resource/v1beta1`).
pub const CONFIG_API_VERSION: &str = "resource.nvidia.com/v1beta1";

/// The API server allows 32 results and 64 configs per allocation; anything beyond these is
/// not a claim the API server wrote and is cut off with a note.
const MAX_RESULTS: usize = 128;
const MAX_CONFIGS: usize = 64;
/// Keys of `defaultPerDevicePinnedMemoryLimit`: each must name one of the group's devices by
/// UUID or index, so a real map has at most twice as many keys as the claim has devices.
const MAX_PER_DEVICE: usize = 2 * MAX_RESULTS;
/// Names and strings kept from a claim are cut to this: they end up in debug pages.
const MAX_STR: usize = 253;
const MAX_NOTES: usize = 16;
const MIB: u64 = 1 << 20;

/// The allocation of one claim. `value` is the claim object as the API server sent it.
pub fn claim_from_json(namespace: &str, name: &str, value: &Value) -> DraClaim {
    let mut claim = DraClaim {
        namespace: namespace.to_owned(),
        name: name.to_owned(),
        ..DraClaim::default()
    };
    let Some(devices) = value.pointer("/status/allocation/devices") else {
        // Not allocated yet (or never will be): nothing is bound to any device.
        return claim;
    };
    let results = devices.get("results").map_or(&[][..], as_slice);
    if results.len() > MAX_RESULTS {
        claim.note(format!(
            "{} allocation results; only the first {MAX_RESULTS} read",
            results.len()
        ));
    }
    for r in results.iter().take(MAX_RESULTS) {
        let field = |k: &str| r.get(k).and_then(Value::as_str).map(short);
        match (
            field("request"),
            field("driver"),
            field("pool"),
            field("device"),
        ) {
            (Some(request), Some(driver), Some(pool), Some(device)) => {
                claim.results.push(ClaimResult {
                    request,
                    driver,
                    pool,
                    device,
                })
            }
            _ => claim.note("an allocation result without request, driver, pool and device"),
        }
    }
    let configs = devices.get("config").map_or(&[][..], as_slice);
    if configs.len() > MAX_CONFIGS {
        claim.note(format!(
            "{} allocation configs; none read, the API server allows {MAX_CONFIGS}",
            configs.len()
        ));
        // A cut list could drop the config with the highest precedence: read none of them
        // and let every device of ours read "unknown".
        claim
            .configs
            .push(ClaimConfig::unreadable("too many configs".into()));
        return claim;
    }
    let mut from_class = Vec::new();
    let mut from_claim = Vec::new();
    let mut invalid = Vec::new();
    for c in configs {
        match c.get("source").and_then(Value::as_str) {
            Some("FromClass") => from_class.extend(config(c)),
            Some("FromClaim") => from_claim.extend(config(c)),
            // The driver refuses a claim with a config of unknown source; so do we, for its devices.
            other => invalid.push(ClaimConfig::unreadable(format!(
                "config source {} is neither FromClass nor FromClaim",
                other.map_or_else(|| "absent".to_owned(), |s| format!("{:?}", short(s)))
            ))),
        }
    }
    // The driver's order, lowest precedence first: class configs, then the claim's own, each
    // in list order (`GetOpaqueDeviceConfigs`).
    claim.configs = from_class
        .into_iter()
        .chain(from_claim)
        .chain(invalid)
        .collect();
    claim
}

/// One config entry; `None` when it is for another driver (which the driver skips too).
fn config(c: &Value) -> Option<ClaimConfig> {
    let requests = match c.get("requests") {
        None | Some(Value::Null) => Vec::new(),
        Some(Value::Array(a)) if a.len() <= MAX_RESULTS => {
            let names: Option<Vec<String>> = a.iter().map(|r| r.as_str().map(short)).collect();
            match names {
                Some(n) => n,
                None => {
                    return Some(ClaimConfig::unreadable(
                        "requests is not a list of names".into(),
                    ))
                }
            }
        }
        Some(_) => {
            return Some(ClaimConfig::unreadable(
                "requests is not a list of names".into(),
            ))
        }
    };
    let Some(opaque) = c.get("opaque").filter(|o| o.is_object()) else {
        // Only opaque configs exist today; the driver refuses a claim with anything else.
        return Some(ClaimConfig {
            requests,
            ..ClaimConfig::unreadable("not an opaque config".into())
        });
    };
    if opaque.get("driver").and_then(Value::as_str) != Some(NVIDIA_DRIVER) {
        return None;
    }
    let (kind, sharing) = match opaque.get("parameters") {
        Some(p) => parameters(p),
        None => (ConfigKind::Unknown, Err("no parameters".to_owned())),
    };
    Some(ClaimConfig {
        requests,
        kind,
        sharing,
    })
}

type Parsed = (ConfigKind, Result<Option<SharingConfig>, String>);

/// `{apiVersion, kind, sharing}` of the driver's config API.
pub fn parameters(p: &Value) -> Parsed {
    let Some(obj) = p.as_object() else {
        return (
            ConfigKind::Unknown,
            Err("parameters are not an object".into()),
        );
    };
    let api_version = obj.get("apiVersion").and_then(Value::as_str);
    if api_version != Some(CONFIG_API_VERSION) {
        let seen = api_version.map_or_else(|| "absent".to_owned(), |v| format!("{:?}", short(v)));
        return (
            ConfigKind::Unknown,
            Err(format!("apiVersion {seen} is not {CONFIG_API_VERSION}")),
        );
    }
    let kind = match obj.get("kind").and_then(Value::as_str) {
        Some("GpuConfig") => ConfigKind::Gpu,
        Some("MigDeviceConfig") => ConfigKind::MigDevice,
        // Carries no sharing; it matters only because it governs passthrough devices.
        Some("VfioDeviceConfig") => return (ConfigKind::Vfio, Ok(None)),
        other => {
            let seen = other.map_or_else(|| "absent".to_owned(), |v| format!("{:?}", short(v)));
            return (
                ConfigKind::Unknown,
                Err(format!("kind {seen} is not known")),
            );
        }
    };
    let sharing = match obj.get("sharing") {
        None | Some(Value::Null) => Ok(None),
        Some(Value::Object(s)) => sharing(kind, s).map(Some),
        Some(_) => Err("sharing is not an object".into()),
    };
    (kind, sharing)
}

fn sharing(kind: ConfigKind, s: &Map<String, Value>) -> Result<SharingConfig, String> {
    let ts = s.get("timeSlicingConfig").filter(|v| !v.is_null());
    let mps = s.get("mpsConfig").filter(|v| !v.is_null());
    match s.get("strategy").and_then(Value::as_str) {
        Some("TimeSlicing") => {
            if mps.is_some() {
                return Err("mpsConfig with the TimeSlicing strategy".into());
            }
            let interval = match ts {
                None => None,
                // MigDeviceSharing has no time-slicing settings; the driver's decoder refuses it.
                Some(_) if kind == ConfigKind::MigDevice => {
                    return Err("timeSlicingConfig in a MigDeviceConfig".into())
                }
                Some(Value::Object(t)) => match t.get("interval") {
                    None | Some(Value::Null) => None,
                    Some(Value::String(i))
                        if ["Default", "Short", "Medium", "Long"].contains(&i.as_str()) =>
                    {
                        Some(i.clone())
                    }
                    Some(other) => {
                        return Err(format!("time-slice interval {} is not known", brief(other)))
                    }
                },
                Some(_) => return Err("timeSlicingConfig is not an object".into()),
            };
            Ok(SharingConfig::TimeSlicing { interval })
        }
        Some("MPS") => {
            if ts.is_some() {
                return Err("timeSlicingConfig with the MPS strategy".into());
            }
            match mps {
                None => Ok(SharingConfig::Mps(MpsConfig::default())),
                Some(Value::Object(m)) => mps_config(m).map(SharingConfig::Mps),
                Some(_) => Err("mpsConfig is not an object".into()),
            }
        }
        Some(other) => Err(format!("sharing strategy {:?} is not known", short(other))),
        None => Err("sharing without a strategy".into()),
    }
}

fn mps_config(m: &Map<String, Value>) -> Result<MpsConfig, String> {
    let mut out = MpsConfig::default();
    for key in m.keys() {
        if ![
            "defaultActiveThreadPercentage",
            "defaultPinnedDeviceMemoryLimit",
            "defaultPerDevicePinnedMemoryLimit",
        ]
        .contains(&key.as_str())
        {
            // The driver's strict decoder refuses unknown fields, so one here comes from a newer
            // driver: keep what is known and say what was skipped.
            out.ignored.push(short(key));
            if out.ignored.len() >= MAX_NOTES {
                break;
            }
        }
    }
    match m.get("defaultActiveThreadPercentage") {
        None | Some(Value::Null) => {}
        // Go decodes this into an int: a fraction or a string is refused there too.
        Some(v) => match v.as_i64() {
            Some(p) if (0..=100).contains(&p) => out.thread_percentage = Some(p as u8),
            Some(p) => return Err(format!("active thread percentage {p} is outside 0..100")),
            None => {
                return Err(format!(
                    "active thread percentage {} is not an integer",
                    brief(v)
                ))
            }
        },
    }
    match m.get("defaultPinnedDeviceMemoryLimit") {
        None | Some(Value::Null) => {}
        Some(v) => out.default_pinned_bytes = Some(pinned_limit(v)?),
    }
    match m.get("defaultPerDevicePinnedMemoryLimit") {
        None | Some(Value::Null) => {}
        Some(Value::Object(per)) if per.len() <= MAX_PER_DEVICE => {
            for (k, v) in per {
                let bytes = pinned_limit(v).map_err(|e| format!("device {:?}: {e}", short(k)))?;
                out.per_device_pinned.push((short(k), bytes));
            }
        }
        Some(Value::Object(per)) => {
            return Err(format!("{} per-device pinned memory limits", per.len()))
        }
        Some(_) => return Err("defaultPerDevicePinnedMemoryLimit is not a map".into()),
    }
    Ok(out)
}

/// A pinned-memory limit as MPS applies it: the driver passes whole MiB (`<n>M`, rounded
/// down) to `set_default_device_pinned_mem_limit` and refuses a limit below 1 MiB.
fn pinned_limit(v: &Value) -> Result<u64, String> {
    let text = match v {
        Value::String(s) => s.clone(),
        // Quantity also decodes from a bare JSON number.
        Value::Number(n) => n.to_string(),
        other => {
            return Err(format!(
                "pinned memory limit {} is not a quantity",
                brief(other)
            ))
        }
    };
    let bytes = parse_quantity(&text)
        .ok_or_else(|| format!("pinned memory limit {:?} is not a quantity", short(&text)))?;
    let mib = bytes / MIB;
    if mib == 0 {
        return Err(format!(
            "pinned memory limit {:?} is below 1 MiB",
            short(&text)
        ));
    }
    Ok(mib * MIB)
}

/// A non-negative Kubernetes quantity (`10Gi`, `512M`, `1.5e9`, `1073741824`) in whole units,
/// rounded up as `Quantity.Value()` does; `None` when malformed, negative or above `u64`.
pub fn parse_quantity(s: &str) -> Option<u64> {
    let s = s.trim();
    if s.is_empty() || s.len() > 64 {
        return None;
    }
    let s = s.strip_prefix('+').unwrap_or(s);
    let num_end = s
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(s.len());
    let (number, suffix) = s.split_at(num_end);
    let (whole, frac) = number.split_once('.').unwrap_or((number, ""));
    if whole.is_empty() && frac.is_empty() || frac.contains('.') {
        return None;
    }
    let (binary_exp, mut dec_exp): (u32, i32) = match suffix {
        "" => (0, 0),
        "Ki" => (10, 0),
        "Mi" => (20, 0),
        "Gi" => (30, 0),
        "Ti" => (40, 0),
        "Pi" => (50, 0),
        "Ei" => (60, 0),
        "n" => (0, -9),
        "u" => (0, -6),
        "m" => (0, -3),
        "k" => (0, 3),
        "M" => (0, 6),
        "G" => (0, 9),
        "T" => (0, 12),
        "P" => (0, 15),
        "E" => (0, 18),
        e if e.starts_with(['e', 'E']) && e.len() <= 5 => (0, e[1..].parse().ok()?),
        _ => return None,
    };
    let digits = format!("{whole}{frac}");
    let digits = digits.trim_start_matches('0');
    if digits.len() > 30 {
        return None;
    }
    let mantissa: u128 = if digits.is_empty() {
        0
    } else {
        digits.parse().ok()?
    };
    dec_exp -= frac.len() as i32;
    let scaled = mantissa.checked_mul(1u128 << binary_exp)?;
    let value = if dec_exp >= 0 {
        scaled.checked_mul(10u128.checked_pow(dec_exp as u32)?)?
    } else {
        match 10u128.checked_pow(dec_exp.unsigned_abs()) {
            Some(div) => scaled.div_ceil(div),
            // Below 10^-38 of a unit: only zero stays zero.
            None => u128::from(scaled > 0),
        }
    };
    u64::try_from(value).ok()
}

fn as_slice(v: &Value) -> &[Value] {
    v.as_array().map_or(&[][..], Vec::as_slice)
}

/// Cut to [`MAX_STR`] bytes on a character boundary.
fn short(s: &str) -> String {
    let cut = (0..=s.len().min(MAX_STR))
        .rev()
        .find(|i| s.is_char_boundary(*i))
        .unwrap_or(0);
    s[..cut].to_owned()
}

/// A JSON value for a message, bounded.
fn brief(v: &Value) -> String {
    short(&v.to_string())
}

impl DraClaim {
    fn note(&mut self, why: impl Into<String>) {
        if self.notes.len() < MAX_NOTES {
            self.notes.push(why.into());
        }
    }
}

impl ClaimConfig {
    fn unreadable(why: String) -> Self {
        Self {
            requests: Vec::new(),
            kind: ConfigKind::Unknown,
            sharing: Err(why),
        }
    }
}

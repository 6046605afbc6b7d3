//! Device-plugin device IDs (`GPU-<uuid>`, `MIG-…`, GKE `nvidia<N>/…`, `::<n>` replicas) and
//! extended-resource names (`nvidia.com/gpu`, `nvidia.com/mig-<profile>[.shared]`).
#![no_main]

use libfuzzer_sys::fuzz_target;
use tessera_exporter::model::device_id::{parse_device_id, DeviceRef, ResourceKind, ResourceMatcher};

fn check_device_id(raw: &str) {
    let id = parse_device_id(raw);
    let shown = id.to_string();
    if let DeviceRef::Unknown(kept) = &id.device {
        // Unknown keeps the whole raw ID, replica suffix included.
        assert_eq!(kept, raw, "Unknown must hold the raw ID");
        assert_eq!(id.replica, None, "Unknown with a replica: {id:?}");
        assert_eq!(shown, raw);
        return;
    }
    // Recognised: only the UUID hex is normalised (lowered), so formatting gives back the input
    // up to case, and exactly when the input had no upper-case hex digit.
    assert!(
        shown.eq_ignore_ascii_case(raw),
        "{raw:?} formats as {shown:?}"
    );
    if !raw.bytes().any(|b| (b'A'..=b'F').contains(&b)) {
        assert_eq!(shown, raw, "lowercase input must round-trip");
    }
    assert_eq!(
        parse_device_id(&shown),
        id,
        "parse(to_string) differs for {raw:?}"
    );
    if let Some(uuid) = id.uuid() {
        assert!(
            uuid.len() == 40 && (uuid.starts_with("GPU-") || uuid.starts_with("MIG-")),
            "bad uuid {uuid:?}"
        );
        assert_eq!(id.device.bare_uuid(), uuid.get(4..));
        assert!(
            !uuid[4..].bytes().any(|b| b.is_ascii_uppercase()),
            "uuid not lowered: {uuid:?}"
        );
    }
    if let Some(gpu) = id.device.gpu_uuid() {
        assert!(
            gpu.starts_with("GPU-") && gpu.len() == 40,
            "bad gpu uuid {gpu:?}"
        );
    }
}

fn check_resource(name: &str) {
    let plain = ResourceMatcher::new(vec![]).classify(name);
    // A configured extra name is always recognised, by pattern first.
    let with_extra = ResourceMatcher::new(vec![name.to_owned()]).classify(name);
    match &plain {
        Some(kind) => assert_eq!(with_extra.as_ref(), Some(kind), "extra changed {name:?}"),
        None => assert_eq!(
            with_extra,
            Some(ResourceKind::Extra),
            "extra not matched {name:?}"
        ),
    }
    match plain {
        None => {}
        Some(ResourceKind::Extra) => panic!("Extra without extras configured: {name:?}"),
        Some(ResourceKind::Gpu { shared }) => {
            let want = if shared {
                "nvidia.com/gpu.shared"
            } else {
                "nvidia.com/gpu"
            };
            assert_eq!(name, want);
        }
        Some(ResourceKind::Mig { profile, shared }) => {
            // NVML's `+` back to the device plugin's `.` gives back the resource name.
            let suffix = if shared { ".shared" } else { "" };
            let rebuilt = format!("nvidia.com/mig-{}{suffix}", profile.replacen('+', ".", 1));
            assert_eq!(
                rebuilt, name,
                "profile {profile:?} does not rebuild the name"
            );
            // `.shared` is only ever the rename suffix, never an attribute of the profile.
            assert!(
                !profile.split(['.', '+']).any(|attr| attr == "shared"),
                "profile kept .shared: {profile:?}"
            );
            assert!(profile.matches('+').count() <= 1, "profile {profile:?}");
        }
    }
}

fuzz_target!(|data: &[u8]| {
    let Ok(s) = std::str::from_utf8(data) else {
        return;
    };
    check_device_id(s);
    check_resource(s);
});

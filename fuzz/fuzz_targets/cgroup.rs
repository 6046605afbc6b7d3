//! `/proc/<pid>/cgroup` contents → pod UID / container ID.
//!
//! Input bytes go through `from_utf8_lossy`, exactly as `read_process_cgroup` feeds the parser.
//! Beyond "no panic", every identity returned must be well formed and traceable to the input.
#![no_main]

use libfuzzer_sys::fuzz_target;
use tessera_exporter::source::cgroup::{parse_cgroup, ContainerRuntime, MAX_CGROUP_FILE_BYTES};

fn lower_hex(s: &str) -> bool {
    s.bytes()
        .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
}

fn canonical_pod_uid(uid: &str) -> bool {
    let b = uid.as_bytes();
    match b.len() {
        // Static pods: the 32-hex config hash.
        32 => lower_hex(uid),
        36 => b.iter().enumerate().all(|(i, &c)| match i {
            8 | 13 | 18 | 23 => c == b'-',
            _ => c.is_ascii_digit() || (b'a'..=b'f').contains(&c),
        }),
        _ => false,
    }
}

fuzz_target!(|data: &[u8]| {
    if data.len() > MAX_CGROUP_FILE_BYTES {
        return;
    }
    let text = String::from_utf8_lossy(data);
    let Some(id) = parse_cgroup(&text) else {
        return;
    };
    assert!(
        id.pod_uid.is_some() || id.container_id.is_some(),
        "empty identity {id:?}"
    );
    // Case-folded input, with systemd's `_` escaping undone, must contain what was found.
    let folded = text.to_ascii_lowercase();
    if let Some(uid) = &id.pod_uid {
        assert!(canonical_pod_uid(uid), "pod uid not canonical: {uid:?}");
        if uid.len() == 36 {
            assert!(
                folded.contains(uid.as_str()) || folded.contains(&uid.replace('-', "_")),
                "pod uid {uid:?} not in input"
            );
        } else {
            assert!(
                folded.contains(uid.as_str()),
                "pod uid {uid:?} not in input"
            );
        }
    } else {
        assert!(id.qos.is_none(), "QoS without a pod: {id:?}");
    }
    match &id.container_id {
        Some(cid) => {
            assert!(
                (12..=128).contains(&cid.len()) && lower_hex(cid),
                "container id not 12-128 lowercase hex: {cid:?}"
            );
            assert!(
                folded.contains(cid.as_str()),
                "container id {cid:?} not in input"
            );
        }
        None => assert_eq!(
            id.runtime,
            ContainerRuntime::Unknown,
            "runtime without container"
        ),
    }
    // An extra empty line, or CRLF line ends, change nothing.
    let again = parse_cgroup(&format!("{text}\n"));
    assert_eq!(
        again.as_ref(),
        Some(&id),
        "trailing newline changed the result"
    );
    if !text.contains('\r') {
        let crlf = text.replace('\n', "\r\n");
        assert_eq!(
            parse_cgroup(&crlf).as_ref(),
            Some(&id),
            "CRLF changed the result"
        );
    }
});

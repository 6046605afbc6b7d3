use super::*;
use proptest::prelude::*;
use ContainerRuntime::{Containerd, CriO, Docker, Podman, Unknown};
use QosClass::{BestEffort, Burstable, Guaranteed};

const UID: &str = "1b6b5f2c-3c4d-4e5f-8a9b-0c1d2e3f4a5b";
const CID: &str = "3f1c2b7a9e8d4c6b5a4f3e2d1c0b9a8f7e6d5c4b3a2f1e0d9c8b7a6f5e4d3c2b";
const GU: Option<QosClass> = Some(Guaranteed);
const BU: Option<QosClass> = Some(Burstable);
const BE: Option<QosClass> = Some(BestEffort);
const KIND: &str = "a9c3e5f70b1d2e4f6a8c0e2d4f6b8a0c2e4d6f8b0a2c4e6d8f0b2a4c6e8d0f2a";
const BURSTABLE_POD: &str =
    "/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod{U_}.slice";

/// Expected (pod uid, container id, runtime, qos); "" stands for `None`.
type Want = Option<(Str, Str, ContainerRuntime, Option<QosClass>)>;
type Str = &'static str;

/// Placeholders keep the table readable: {U} dashed UID, {U_} systemd-escaped UID, {C}
/// container ID, {K} kind node container, {S} static pod hash, {BS} a burstable systemd pod.
fn expand(t: &str) -> String {
    t.replace("{BS}", BURSTABLE_POD)
        .replace("{U}", UID)
        .replace("{U_}", &UID.replace('-', "_"))
        .replace("{C}", CID)
        .replace("{K}", KIND)
        .replace("{S}", "6f2e0c7b1d3a4958b0e2c4d6f8a0b1c3")
}

/// A realistic cgroup v1 file: eleven controller hierarchies at `path`, name=systemd at
/// `systemd`, and the empty unified line of a hybrid host.
fn v1(path: &str, systemd: &str) -> String {
    let ctrls = "12:hugetlb 11:memory 10:cpu,cpuacct 9:perf_event 8:devices \
                     7:net_cls,net_prio 6:freezer 5:blkio 4:pids 3:cpuset 2:rdma";
    let mut out: String = ctrls.split(' ').map(|c| format!("{c}:{path}\n")).collect();
    out.push_str(&format!("1:name=systemd:{systemd}\n0::/\n"));
    out
}

/// `/path` → a v2 file; `v1:/path[|/systemd path]` → a v1 file; anything else verbatim.
fn file(t: &str) -> String {
    let t = expand(t);
    match t.strip_prefix("v1:") {
        Some(rest) => {
            let (path, systemd) = rest.split_once('|').unwrap_or((rest, rest));
            v1(path, systemd)
        }
        None if t.starts_with('/') => format!("0::{t}\n"),
        None => t,
    }
}

fn check(name: &str, contents: &str, want: Want) {
    let got = parse_cgroup(contents);
    let got = got.as_ref().map(|g| {
        let s = |o: &Option<String>| o.clone().unwrap_or_default();
        (s(&g.pod_uid), s(&g.container_id), g.runtime, g.qos)
    });
    let want = want.map(|(p, c, r, q)| (expand(p), expand(c), r, q));
    let shown: String = contents.chars().take(300).collect();
    assert_eq!(got, want, "{name}: {shown:?}");
}

#[rustfmt::skip]
    const SHAPES: &[(&str, &str, Want)] = &[
        ("v2 systemd containerd", "{BS}/cri-containerd-{C}.scope", Some(("{U}", "{C}", Containerd, BU))),
        ("v2 systemd guaranteed", "/kubepods.slice/kubepods-pod{U_}.slice/cri-containerd-{C}.scope", Some(("{U}", "{C}", Containerd, GU))),
        ("v2 systemd besteffort", "/kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod{U_}.slice/cri-containerd-{C}.scope", Some(("{U}", "{C}", Containerd, BE))),
        ("v2 cgroupfs burstable", "/kubepods/burstable/pod{U}/{C}", Some(("{U}", "{C}", Unknown, BU))),
        ("v2 cgroupfs guaranteed", "/kubepods/pod{U}/{C}", Some(("{U}", "{C}", Unknown, GU))),
        ("v1 systemd containerd", "v1:{BS}/cri-containerd-{C}.scope", Some(("{U}", "{C}", Containerd, BU))),
        ("v1 cgroupfs, name=systemd elsewhere", "v1:/kubepods/besteffort/pod{U}/{C}|/system.slice/containerd.service", Some(("{U}", "{C}", Unknown, BE))),
        ("v1 slice:cri-containerd:id", "v1:{BS}:cri-containerd:{C}", Some(("{U}", "{C}", Containerd, BU))),
        ("v1 slice:crio:id, own root", "v1:/system.slice/containerd.service/kubepods-pod{U_}.slice:crio:{C}|/", Some(("{U}", "{C}", CriO, GU))),
        ("cri-o systemd", "{BS}/crio-{C}.scope", Some(("{U}", "{C}", CriO, BU))),
        ("cri-o container subcgroup", "{BS}/crio-{C}.scope/container", Some(("{U}", "{C}", CriO, BU))),
        ("cri-o conmon is no container", "{BS}/crio-conmon-{C}.scope", Some(("{U}", "", Unknown, BU))),
        ("cri-o cgroupfs", "v1:/kubepods/besteffort/pod{U}/crio-{C}", Some(("{U}", "{C}", CriO, BE))),
        ("cri-dockerd systemd", "{BS}/docker-{C}.scope", Some(("{U}", "{C}", Docker, BU))),
        ("pod sandbox level", "{BS}", Some(("{U}", "", Unknown, BU))),
        ("static pod config hash", "/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod{S}.slice/cri-containerd-{C}.scope", Some(("{S}", "{C}", Containerd, BU))),
        ("plain docker v2", "/system.slice/docker-{C}.scope", Some(("", "{C}", Docker, None))),
        ("plain docker v1", "v1:/docker/{C}", Some(("", "{C}", Docker, None))),
        ("rootless podman", "/user.slice/user-1000.slice/user@1000.service/user.slice/libpod-{C}.scope/container", Some(("", "{C}", Podman, None))),
        ("podman conmon", "/machine.slice/libpod-conmon-{C}.scope", None),
        ("kind v2 in docker scope", "/system.slice/docker-{K}.scope/kubelet.slice/kubelet-kubepods.slice/kubelet-kubepods-besteffort.slice/kubelet-kubepods-besteffort-pod{U_}.slice/cri-containerd-{C}.scope", Some(("{U}", "{C}", Containerd, BE))),
        ("kind v1 under /docker", "v1:/docker/{K}/kubepods/burstable/pod{U}/{C}", Some(("{U}", "{C}", Unknown, BU))),
        ("kind pod level is not the node", "/docker/{K}/kubepods/besteffort/pod{U}", Some(("{U}", "", Unknown, BE))),
        ("kind node's own daemon", "/system.slice/docker-{K}.scope/system.slice/containerd.service", Some(("", "{K}", Docker, None))),
        ("dind in a pod keeps the pod's container", "/kubepods/pod{U}/{C}/docker/{K}", Some(("{U}", "{C}", Unknown, GU))),
        ("private cgroupns, systemd", "/../../kubepods-besteffort-pod{U_}.slice/cri-containerd-{C}.scope", Some(("{U}", "{C}", Containerd, BE))),
        ("private cgroupns, cgroupfs", "/../../pod{U}/{C}", Some(("{U}", "{C}", Unknown, None))),
        ("deleted cgroup", "/kubepods/burstable/pod{U}/{C} (deleted)", Some(("{U}", "{C}", Unknown, BU))),
        ("crlf, blanks, garbage", "\r\nnot a line\r\n\r\n7:x\r\n0::{BS}/cri-containerd-{C}.scope\r\n\r\n", Some(("{U}", "{C}", Containerd, BU))),
        ("pod line beats container line", "2:cpu:/docker/{K}\n1:name=systemd:/kubepods/pod{U}/{C}\n", Some(("{U}", "{C}", Unknown, GU))),
        ("container beats pod level", "2:cpu:/kubepods/pod{U}\n1:name=systemd:/kubepods/pod{U}/{C}\n", Some(("{U}", "{C}", Unknown, GU))),
        ("own namespace root", "0::/\n", None),
        ("v1 outside kubernetes", "v1:/user.slice|/user.slice/user-1000.slice/session-2.scope", None),
        ("process_api", "/process_api/{C}", None),
        ("user session", "/user.slice/user-1000.slice/session-3.scope", None),
        ("init", "/init.scope", None),
        ("containerd daemon", "/system.slice/containerd.service", None),
        // Hostile or malformed.
        ("empty", "", None),
        ("pod without uid", "/kubepods/burstable/pod/{C}", None),
        ("systemd pod without uid", "/kubepods.slice/kubepods-pod.slice", None),
        ("uid too short", "/kubepods/pod1b6b5f2c-3c4d-4e5f-8a9b-0c1d2e3f4a5/{C}", None),
        ("uid too long", "/kubepods/pod{U}0/{C}", None),
        ("uid 31 bare hex", "/kubepods/pod6f2e0c7b1d3a4958b0e2c4d6f8a0b1c/{C}", None),
        ("mixed separators", "/kubepods/pod1b6b5f2c-3c4d_4e5f-8a9b-0c1d2e3f4a5b", None),
        ("non-hex uid", "/kubepods/pod1b6b5f2c-3c4d-4e5f-8a9b-0c1d2e3f4a5g", None),
        ("slice outside kubepods", "/machine.slice/machine-pod{U_}.slice", None),
        ("dot-dot between pod and container", "/kubepods/pod{U}/../{C}", Some(("{U}", "", Unknown, GU))),
        ("only dot-dots", "/../../..", None),
        ("non-hex container", "/kubepods/pod{U}/cri-containerd-xyz.scope", Some(("{U}", "", Unknown, GU))),
        ("short container", "/kubepods/pod{U}/abc123", Some(("{U}", "", Unknown, GU))),
        ("empty composite id", "/kubepods-pod{U_}.slice:cri-containerd:", Some(("{U}", "", Unknown, GU))),
        ("uppercase normalised", "/kubepods/pod1B6B5F2C-3C4D-4E5F-8A9B-0C1D2E3F4A5B/{C}", Some(("{U}", "{C}", Unknown, GU))),
        ("colons everywhere", ":::::\n0:::::\n::/::/", None),
        ("no leading slash", "0::kubepods/pod{U}/{C}", None),
        ("non-numeric hierarchy", "x::/kubepods/pod{U}/{C}", None),
    ];

#[test]
fn shape_table() {
    for (name, text, want) in SHAPES {
        check(name, &file(text), *want);
    }
}

#[test]
fn huge_and_binary_inputs() {
    let junk: Vec<u8> = (0..=255u8).cycle().take(4096).collect();
    check("binary", &String::from_utf8_lossy(&junk), None);
    check(
        "1 MB segment",
        &format!("0::/kubepods/pod{}\n", "a".repeat(1 << 20)),
        None,
    );
    check("100k lines", &"0::/x\n".repeat(100_000), None);
    let deep = format!("0::/{}kubepods/pod{UID}/{CID}\n", "x/".repeat(1 << 19));
    check(
        "1 MB path, match at the end",
        &deep,
        Some(("{U}", "{C}", Unknown, GU)),
    );
}

#[test]
fn status_container_ids() {
    let split = split_status_container_id;
    assert_eq!(split("containerd://abc"), (Containerd, "abc"));
    assert_eq!(split("cri-o://abc"), (CriO, "abc"));
    assert_eq!(split("docker://abc"), (Docker, "abc"));
    assert_eq!(split("abc"), (Unknown, "abc"));
    assert_eq!(Containerd.status_scheme(), Some("containerd"));
    assert_eq!(BestEffort.as_str(), "besteffort");
}

#[test]
fn reads_from_a_procfs_tree() {
    let root = std::env::temp_dir().join(format!("tessera-cgroup-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&root);
    let write = |pid: u32, bytes: &[u8]| {
        std::fs::create_dir_all(root.join(pid.to_string())).unwrap();
        std::fs::write(root.join(pid.to_string()).join("cgroup"), bytes).unwrap();
    };
    let ok = file("/kubepods/burstable/pod{U}/{C}").into_bytes();
    write(42, &ok);
    write(43, &[b"9:\xff\xfe:/garbage\xc3\n".as_slice(), &ok].concat());
    let mut at_limit = ok.clone();
    at_limit.resize(MAX_CGROUP_FILE_BYTES, b'\n');
    write(44, &at_limit);
    write(45, &[at_limit.as_slice(), b"\n"].concat());
    write(46, b"0::/init.scope\n");
    std::fs::create_dir_all(root.join("47/cgroup")).unwrap();

    for pid in [42, 43, 44] {
        let id = read_process_cgroup(&root, pid).unwrap().unwrap();
        assert_eq!(id.pod_uid.as_deref(), Some(UID), "pid {pid}");
        assert_eq!(id.container_id.as_deref(), Some(CID), "pid {pid}");
    }
    let err = read_process_cgroup(&root, 45).unwrap_err();
    assert!(matches!(err, CgroupError::TooLarge { .. }), "{err}");
    assert!(read_process_cgroup(&root, 46).unwrap().is_none());
    let err = read_process_cgroup(&root, 47).unwrap_err();
    assert!(matches!(err, CgroupError::Io { .. }), "{err}");
    let err = read_process_cgroup(&root, 48).unwrap_err();
    assert!(matches!(err, CgroupError::NotFound { pid: 48 }), "{err}");
    std::fs::remove_dir_all(&root).unwrap();
}

fn hex(len: usize) -> impl Strategy<Value = String> {
    proptest::string::string_regex(&format!("[0-9a-f]{{{len}}}")).unwrap()
}

proptest! {
    #[test]
    fn never_panics_on_strings(s in any::<String>()) {
        let _ = parse_cgroup(&s);
    }

    #[test]
    fn never_panics_on_cgroupish(s in "([0-9]{0,2}:[a-z=,]{0,6}:(/(\\.\\.|kubepods|pod[0-9a-f_-]{0,40}|[a-z-]{0,20}\\.(slice|scope)|[0-9a-f]{0,70}|docker|[:a-z-]{0,20}))*\r?\n){0,6}") {
        let _ = parse_cgroup(&s);
    }

    #[test]
    fn never_panics_on_bytes(b in proptest::collection::vec(any::<u8>(), 0..512)) {
        let _ = parse_cgroup(&String::from_utf8_lossy(&b));
    }

    #[test]
    fn generated_paths_round_trip(
        uid in "[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}",
        cid in hex(64),
        outer in hex(64),
        (shape, qos, prefix) in (0..5usize, 0..3usize, 0..4usize),
        v1_file in any::<bool>(),
    ) {
        let uid_ = uid.replace('-', "_");
        let (level, want) = [("", Guaranteed), ("-burstable", Burstable), ("-besteffort", BestEffort)][qos];
        let sd = if level.is_empty() { String::new() } else { format!("/kubepods{level}.slice") };
        let sd = format!("/kubepods.slice{sd}/kubepods{level}-pod");
        let (path, runtime) = match shape {
            0 => (format!("{sd}{uid_}.slice/cri-containerd-{cid}.scope"), Containerd),
            1 => (format!("{sd}{uid_}.slice/crio-{cid}.scope"), CriO),
            2 => (format!("{sd}{uid_}.slice:cri-containerd:{cid}"), Containerd),
            3 => (format!("/kubepods{}/pod{uid}/{cid}", level.replace('-', "/")), Unknown),
            _ => (format!("{sd}{uid}.slice/docker-{cid}.scope"), Docker),
        };
        let outer = ["", "/../..", &format!("/docker/{outer}"), &format!("/system.slice/docker-{outer}.scope")][prefix].to_string();
        let path = format!("{outer}{path}");
        let text = if v1_file { v1(&path, &path) } else { format!("0::{path}\n") };
        let got = parse_cgroup(&text).unwrap();
        prop_assert_eq!(got.pod_uid, Some(uid));
        prop_assert_eq!(got.container_id, Some(cid));
        prop_assert_eq!(got.runtime, runtime);
        prop_assert_eq!(got.qos, Some(want));
    }
}

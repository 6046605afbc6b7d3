//! Process cgroup → Kubernetes pod UID and container ID.
//!
//! NVML reports host PIDs; `/proc/<pid>/cgroup` tells which pod and container a PID lives in.
//! The file has one `N:controllers:/path` line per cgroup v1 hierarchy (including
//! `1:name=systemd:`) or a single `0::/path` line on cgroup v2. Shapes recognised in a path:
//!
//! * systemd driver: `/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod<uid>.slice/`
//!   `cri-containerd-<id>.scope`; Guaranteed pods as `kubepods-pod<uid>.slice`; any cgroup-root
//!   prefix on the slice names (kind's `kubelet-kubepods-…`);
//! * cgroupfs driver: `/kubepods/burstable/pod<uid>/<id>`, `/kubepods/pod<uid>/<id>`;
//! * runtime scopes `cri-containerd-<id>`, `crio-<id>`, `docker-<id>`, `libpod-<id>` (with or
//!   without `.scope`), `/docker/<id>`, and the v1 systemd form
//!   `…-pod<uid>.slice:cri-containerd:<id>`; `crio-conmon-` / `libpod-conmon-` scopes hold the
//!   runtime's monitor, never the container;
//! * nested nodes (kind: a whole node inside `docker-<id>.scope` or `/docker/<id>/kubepods/…`):
//!   the deepest pod wins, and its container is the cgroup directly below it;
//! * relative paths from a private cgroup namespace (`0::/../../kubepods-…`, `0::/`): only path
//!   segments are matched, never a fixed prefix; a trailing ` (deleted)` is ignored.
//!
//! Pod UIDs must be 32 hex digits in 8-4-4-4-12 groups separated by `-` or `_` (systemd escapes
//! `-`); they come back dashed and lowercase. A bare 32-hex UID is also accepted (lowercased):
//! static pods use their config hash as UID (the `kubernetes.io/config.hash` annotation).
//! Container IDs are 12–128 hex digits, returned lowercase without prefix or suffix.
//!
//! [`parse_cgroup`] returns `None` when the process is in no recognisable container or pod
//! (`/user.slice/…`, `/init.scope`, `0::/`). A container outside Kubernetes (plain docker or
//! podman) yields an identity with `pod_uid: None`. Parsing borrows the input and keeps at most
//! one candidate per line, so hostile input costs time linear in its size and constant memory.

use std::fs::File;
use std::io::{self, Read};
use std::path::{Path, PathBuf};

pub use crate::model::identity::{
    split_status_container_id, CgroupIdentity, ContainerRuntime, QosClass,
};

/// Cap on the bytes read from one `/proc/<pid>/cgroup`; real files are well under 4 KiB.
pub const MAX_CGROUP_FILE_BYTES: usize = 64 * 1024;

#[derive(Debug, thiserror::Error)]
pub enum CgroupError {
    /// The process exited; expected churn between an NVML sample and the read.
    #[error("process {pid} no longer exists")]
    NotFound { pid: u32 },
    #[error("reading {}: {source}", path.display())]
    Io {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
    #[error("{} exceeds {limit} bytes", path.display())]
    TooLarge { path: PathBuf, limit: usize },
}

/// Parses the contents of `/proc/<pid>/cgroup`.
///
/// Among several lines (cgroup v1), a line yielding a pod beats one yielding only a container,
/// which beats one yielding nothing; ties keep the first line.
pub fn parse_cgroup(contents: &str) -> Option<CgroupIdentity> {
    let mut best: Option<CgroupIdentity> = None;
    for line in contents.split('\n') {
        let Some(found) = line_path(line).and_then(parse_path) else {
            continue;
        };
        if best.as_ref().is_none_or(|b| rank(&found) > rank(b)) {
            best = Some(found);
        }
    }
    best
}

/// Reads and parses `<procfs>/<pid>/cgroup`, reading at most [`MAX_CGROUP_FILE_BYTES`].
/// Invalid UTF-8 is replaced rather than rejected: one bad byte must not hide a good line.
pub fn read_process_cgroup(procfs: &Path, pid: u32) -> Result<Option<CgroupIdentity>, CgroupError> {
    let path = procfs.join(pid.to_string()).join("cgroup");
    let file = File::open(&path).map_err(|e| io_error(e, pid, &path))?;
    let mut buf = Vec::with_capacity(4096);
    let limit = MAX_CGROUP_FILE_BYTES as u64 + 1;
    file.take(limit)
        .read_to_end(&mut buf)
        .map_err(|e| io_error(e, pid, &path))?;
    if buf.len() > MAX_CGROUP_FILE_BYTES {
        return Err(CgroupError::TooLarge {
            path,
            limit: MAX_CGROUP_FILE_BYTES,
        });
    }
    Ok(parse_cgroup(&String::from_utf8_lossy(&buf)))
}

/// ESRCH: procfs answers reads of a task that exited after `open` with it.
const ESRCH: i32 = 3;

fn io_error(source: io::Error, pid: u32, path: &Path) -> CgroupError {
    if source.kind() == io::ErrorKind::NotFound || source.raw_os_error() == Some(ESRCH) {
        CgroupError::NotFound { pid }
    } else {
        CgroupError::Io {
            path: path.to_path_buf(),
            source,
        }
    }
}

fn rank(id: &CgroupIdentity) -> (bool, bool) {
    (id.pod_uid.is_some(), id.container_id.is_some())
}

/// The path of one `hierarchy:controllers:path` line; the path itself may contain `:`.
fn line_path(line: &str) -> Option<&str> {
    let line = line.trim_end_matches(['\r', '\n']);
    let mut fields = line.splitn(3, ':');
    let hierarchy = fields.next()?;
    let _controllers = fields.next()?;
    let path = fields.next()?;
    if hierarchy.is_empty() || !hierarchy.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let path = path.strip_suffix(" (deleted)").unwrap_or(path);
    path.starts_with('/').then_some(path)
}

/// What the previous segment makes of the next one.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Ctx {
    Other,
    Kubepods,
    Qos(QosClass),
    Pod,
    Docker,
}

fn parse_path(path: &str) -> Option<CgroupIdentity> {
    let mut pod: Option<(String, Option<QosClass>)> = None;
    let mut container: Option<(String, ContainerRuntime)> = None;
    let mut ctx = Ctx::Other;
    for seg in path.split('/') {
        let (head, composite) = match seg.split_once(':') {
            Some((head, rest)) => (head, Some(rest)),
            None => (seg, None),
        };
        if let Some(found) = pod_segment(head, ctx) {
            // A deeper pod is a nested node (kind): everything found above it was the host's.
            pod = Some(found);
            container = composite.and_then(composite_container);
            ctx = if composite.is_some() {
                Ctx::Other
            } else {
                Ctx::Pod
            };
            continue;
        }
        if composite.is_some() {
            ctx = Ctx::Other;
            continue;
        }
        let candidate = match ctx {
            Ctx::Pod => prefixed_container(seg)
                .or_else(|| container_id(seg).map(|id| (id, ContainerRuntime::Unknown))),
            Ctx::Docker => container_id(seg).map(|id| (id, ContainerRuntime::Docker)),
            _ => prefixed_container(seg),
        };
        // Under a pod only its direct child is the pod's container; anything deeper is nested
        // inside that container (docker-in-docker) and unknown to the kubelet.
        if candidate.is_some() && (ctx == Ctx::Pod || pod.is_none()) {
            container = candidate;
        }
        ctx = next_ctx(seg, ctx);
    }
    if pod.is_none() && container.is_none() {
        return None;
    }
    let (pod_uid, qos) = match pod {
        Some((uid, qos)) => (Some(uid), qos),
        None => (None, None),
    };
    let (container_id, runtime) = match container {
        Some((id, runtime)) => (Some(id), runtime),
        None => (None, ContainerRuntime::Unknown),
    };
    Some(CgroupIdentity {
        pod_uid,
        container_id,
        runtime,
        qos,
    })
}

fn next_ctx(seg: &str, ctx: Ctx) -> Ctx {
    match seg {
        "kubepods" => return Ctx::Kubepods,
        "docker" => return Ctx::Docker,
        "burstable" if ctx == Ctx::Kubepods => return Ctx::Qos(QosClass::Burstable),
        "besteffort" if ctx == Ctx::Kubepods => return Ctx::Qos(QosClass::BestEffort),
        _ => {}
    }
    match seg.strip_suffix(".slice").map(systemd_level) {
        Some(Some(QosClass::Guaranteed)) => Ctx::Kubepods,
        Some(Some(qos)) => Ctx::Qos(qos),
        _ => Ctx::Other,
    }
}

/// `kubepods-burstable-pod<uid>.slice` (any cgroup-root prefix) or cgroupfs `pod<uid>`.
fn pod_segment(seg: &str, ctx: Ctx) -> Option<(String, Option<QosClass>)> {
    if let Some(stem) = seg.strip_suffix(".slice") {
        // `-pod` cannot occur inside a UID (`p`, `o` are not hex), so the last one splits it off.
        let (parent, uid) = stem.rsplit_once("-pod")?;
        let qos = systemd_level(parent)?;
        return Some((pod_uid(uid)?, Some(qos)));
    }
    let uid = pod_uid(seg.strip_prefix("pod")?)?;
    let qos = match ctx {
        Ctx::Kubepods => Some(QosClass::Guaranteed),
        Ctx::Qos(qos) => Some(qos),
        _ => None,
    };
    Some((uid, qos))
}

/// QoS level named by a systemd slice stem: `…kubepods` is the root, where Guaranteed pods
/// live; `…kubepods-burstable` / `…kubepods-besteffort` are the other two levels.
fn systemd_level(stem: &str) -> Option<QosClass> {
    let mut parts = stem.rsplit('-');
    let qos = match parts.next()? {
        "kubepods" => return Some(QosClass::Guaranteed),
        "burstable" => QosClass::Burstable,
        "besteffort" => QosClass::BestEffort,
        _ => return None,
    };
    (parts.next()? == "kubepods").then_some(qos)
}

const RUNTIME_PREFIXES: [(&str, ContainerRuntime); 4] = [
    ("cri-containerd", ContainerRuntime::Containerd),
    ("crio", ContainerRuntime::CriO),
    ("docker", ContainerRuntime::Docker),
    ("libpod", ContainerRuntime::Podman),
];

/// `cri-containerd-<id>.scope`, `crio-<id>`, `docker-<id>.scope`, `libpod-<id>.scope`.
fn prefixed_container(seg: &str) -> Option<(String, ContainerRuntime)> {
    let name = seg.strip_suffix(".scope").unwrap_or(seg);
    let (prefix, id) = match name.strip_prefix("cri-containerd-") {
        Some(id) => ("cri-containerd", id),
        None => name.split_once('-')?,
    };
    // Conmon scopes hold the runtime's monitor process, not the workload.
    if id.starts_with("conmon-") {
        return None;
    }
    runtime_named(prefix).and_then(|rt| Some((container_id(id)?, rt)))
}

/// The `prefix:id` after a v1 systemd slice (`…-pod<uid>.slice:cri-containerd:<id>`).
fn composite_container(rest: &str) -> Option<(String, ContainerRuntime)> {
    let (prefix, id) = rest.split_once(':')?;
    let runtime = runtime_named(prefix).unwrap_or(ContainerRuntime::Unknown);
    Some((container_id(id)?, runtime))
}

fn runtime_named(prefix: &str) -> Option<ContainerRuntime> {
    RUNTIME_PREFIXES
        .iter()
        .find(|(p, _)| *p == prefix)
        .map(|(_, rt)| *rt)
}

fn container_id(s: &str) -> Option<String> {
    ((12..=128).contains(&s.len()) && s.bytes().all(|b| b.is_ascii_hexdigit()))
        .then(|| s.to_ascii_lowercase())
}

/// 8-4-4-4-12 hex with one separator kind (`-`, or `_` from systemd escaping) → dashed
/// lowercase; 32 bare hex digits (static pod config hash) → lowercase.
fn pod_uid(s: &str) -> Option<String> {
    let b = s.as_bytes();
    if b.len() == 32 && b.iter().all(u8::is_ascii_hexdigit) {
        return Some(s.to_ascii_lowercase());
    }
    if b.len() != 36 {
        return None;
    }
    let sep = b[8];
    if sep != b'-' && sep != b'_' {
        return None;
    }
    let mut out = String::with_capacity(36);
    for (i, &c) in b.iter().enumerate() {
        if matches!(i, 8 | 13 | 18 | 23) {
            if c != sep {
                return None;
            }
            out.push('-');
        } else if c.is_ascii_hexdigit() {
            out.push(char::from(c.to_ascii_lowercase()));
        } else {
            return None;
        }
    }
    Some(out)
}

#[cfg(test)]
#[path = "cgroup_tests.rs"]
mod tests;

//! Who a process is, as its cgroup path tells: pod UID, container ID, runtime and QoS class.
//! The cgroup parser produces these; the join reads them.

/// Which runtime created the container, when the cgroup name says so.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ContainerRuntime {
    Containerd,
    CriO,
    Docker,
    Podman,
    /// cgroupfs driver paths carry a bare ID that does not name its runtime.
    Unknown,
}

impl ContainerRuntime {
    /// The scheme Kubernetes puts in front of container IDs in pod status (`containerd://<id>`).
    pub fn status_scheme(self) -> Option<&'static str> {
        match self {
            Self::Containerd => Some("containerd"),
            Self::CriO => Some("cri-o"),
            Self::Docker => Some("docker"),
            Self::Podman | Self::Unknown => None,
        }
    }
}

/// Splits a pod-status container ID (`containerd://<id>`) into runtime and bare ID, so it can
/// be compared with [`CgroupIdentity::container_id`].
pub fn split_status_container_id(status_id: &str) -> (ContainerRuntime, &str) {
    match status_id.split_once("://") {
        Some(("containerd", id)) => (ContainerRuntime::Containerd, id),
        Some(("cri-o", id)) => (ContainerRuntime::CriO, id),
        Some(("docker", id)) => (ContainerRuntime::Docker, id),
        Some((_, id)) => (ContainerRuntime::Unknown, id),
        None => (ContainerRuntime::Unknown, status_id),
    }
}

/// Pod QoS class as encoded in the cgroup hierarchy.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum QosClass {
    Guaranteed,
    Burstable,
    BestEffort,
}

impl QosClass {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Guaranteed => "guaranteed",
            Self::Burstable => "burstable",
            Self::BestEffort => "besteffort",
        }
    }
}

/// What a process's cgroup says about its pod and container.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CgroupIdentity {
    /// Canonical dashed lowercase UID, or the 32-hex config hash of a static pod.
    pub pod_uid: Option<String>,
    /// Bare lowercase container ID; `None` for a process in the pod-level (sandbox) cgroup.
    pub container_id: Option<String>,
    pub runtime: ContainerRuntime,
    /// `None` when the path does not say (relative cgroupfs paths, containers outside Kubernetes).
    pub qos: Option<QosClass>,
}

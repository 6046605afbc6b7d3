//! tessera on a real node: etcd, kube-apiserver, containerd + runc and a kubelet, with pods that
//! hold GPUs through the kubelet's device-plugin API. `#[ignore]`d: scripts/test-kube-node.sh
//! starts the node and runs them with `--ignored`, one at a time (they share the node's devices).
//!
//! What is real: the kubelet's admission, device allocation and pod-resources answers; the
//! containers, their cgroups and `/proc`; the API server's pods. What is not: the GPUs. The fake
//! NVML reports the real PIDs of the pods' processes (`pid_file`), on the devices the kubelet
//! gave their containers. docs/kubernetes-real-node.md says what this proves and what it cannot.

mod kube_node;
mod support;

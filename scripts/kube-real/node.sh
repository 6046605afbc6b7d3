#!/usr/bin/env bash
# A real node for the tests: containerd + runc and a kubelet registered with the control plane
# of control-plane.sh, plus the device-plugin fixture (device-plugin/main.go). Everything it
# starts lives under DIR and is stopped by its pid.
#
#   node.sh start DIR BIN_DIR IMAGES_DIR      # DIR holds a started control plane (control-plane.sh)
#   node.sh restart-kubelet DIR               # kubelet only: pods keep running
#   node.sh restart-containerd DIR            # containerd only: containers keep running (shims)
#   node.sh stop DIR                          # pods must be deleted first; stops and cleans up
#
# The machine keeps its settings (docs/kubernetes-real-node.md):
#   - containerd, the kubelet and the device plugin run in one private mount namespace, held by
#     an `unshare` process. The kubelet writes vm.overcommit_memory, kernel.panic and friends on
#     start; in that namespace files bind-mounted over those /proc/sys entries take the writes.
#     containerd's rootfs and shm mounts, the pods' volume mounts and the kubelet's hard-coded
#     host paths (/var/lib/kubelet/device-plugins, /var/log/containers, /run/containerd,
#     /run/netns, /var/lib/cni) are private to it, on tmpfs or binds of DIR, and vanish with it;
#     the mount points it had to make are removed. So are the CUDA probe's host paths that
#     deploy/overlays/cuda-probe mounts into pods (/run/tessera, /opt/tessera/lib): binds of
#     DIR/node/probe-socket and DIR/node/probe-library, so the overlay's hostPaths reach
#     nothing outside the node, and a probe stage beside it keeps its own.
#   - the kubelet's cgroupfs driver makes /sys/fs/cgroup/<controller>/kubepods; `stop` removes it.
#   - no iptables: makeIPTablesUtilChains is off and the only CNI plugin is loopback.
set -euo pipefail
cmd=${1:?start|restart-kubelet|restart-containerd|stop}
dir=${2:?state directory}
dir=$(cd "$dir" && pwd)
node_dir=$dir/node
NODE_NAME=${TESSERA_NODE_NAME:-tessera-node}
# A TEST-NET-1 address: the kubelet refuses loopback as its node IP, and this one reaches nothing.
NODE_IP=192.0.2.2
# The kubelet's writes to these land in files of DIR (kubelet/cm/container_manager_linux.go).
SYSCTLS=(vm/overcommit_memory vm/panic_on_oom kernel/panic kernel/panic_on_oops
         kernel/keys/root_maxkeys kernel/keys/root_maxbytes)
# Host paths the kubelet, containerd and the shims use whatever their configuration says.
PRIVATE_DIRS=(/var/lib/kubelet/device-plugins /var/log/containers /run/containerd /run/netns /var/lib/cni
              /run/tessera /opt/tessera/lib)

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
log() { echo "kube-node: $*"; }
in_ns() { nsenter -t "$(cat "$node_dir/holder.pid")" -m -- "$@"; }
# Backgrounded, a shell function would be a subshell whose pid is not the daemon's: exec it.
in_ns_bg() { exec nsenter -t "$(cat "$node_dir/holder.pid")" -m -- "$@"; }

stop_pid() {
  local f=$1 pid
  [ -f "$f" ] || return 0
  pid=$(cat "$f")
  if kill "$pid" 2>/dev/null; then
    for _ in $(seq 1 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    kill -9 "$pid" 2>/dev/null || true
  fi
  rm -f "$f"
}

# wait_for LOG WHAT SECONDS PID_FILE CMD...: until CMD succeeds; LOG's tail when it does not.
wait_for() {
  local name=$1 what=$2 seconds=$3 pid_file=$4
  shift 4
  local i
  for i in $(seq 1 $((seconds * 5))); do
    if "$@" >/dev/null 2>&1; then
      log "$what after $((i / 5)).$((i % 5 * 2)) s"
      return 0
    fi
    if [ -n "$pid_file" ] && ! kill -0 "$(cat "$pid_file")" 2>/dev/null; then
      tail -30 "$node_dir/$name.log" >&2 || true
      log "$name exited" >&2
      return 1
    fi
    sleep 0.2
  done
  tail -30 "$node_dir/$name.log" >&2 || true
  log "$what: not after $seconds s" >&2
  return 1
}

ctr_() { ctr --address "$node_dir/containerd/containerd.sock" -n k8s.io "$@"; }

start_containerd() {
  in_ns_bg containerd --config "$node_dir/containerd.toml" >>"$node_dir/containerd.log" 2>&1 &
  echo $! >"$node_dir/containerd.pid"
  wait_for containerd "containerd ready" 30 "$node_dir/containerd.pid" ctr_ version
}

start_kubelet() {
  # shellcheck disable=SC1091
  . "$node_dir/env"
  in_ns_bg "$BIN_DIR/kubelet" --config="$node_dir/kubelet.yaml" \
    --kubeconfig="$dir/admin.kubeconfig" --root-dir="$node_dir/kubelet" --cert-dir="$node_dir/kubelet/pki" \
    --hostname-override="$NODE_NAME" --node-ip="$NODE_IP" --v=2 \
    >>"$node_dir/kubelet.log" 2>&1 &
  echo $! >"$node_dir/kubelet.pid"
  wait_for kubelet "kubelet healthy" 60 "$node_dir/kubelet.pid" \
    curl -sf "http://127.0.0.1:$KUBELET_HEALTHZ_PORT/healthz"
}

start_device_plugin() {
  in_ns_bg "$BIN_DIR/tessera-device-plugin" -config "$node_dir/devices.json" \
    >>"$node_dir/device-plugin.log" 2>&1 &
  echo $! >"$node_dir/device-plugin.pid"
}

write_configs() {
  local bin_dir=$1
  mkdir -p "$node_dir"/{containerd/root,containerd/state,containerd/opt,runc,cni/net.d,sysctl,kubelet,pod-logs,volume-plugins,device-plugins}
  # As the overlay's DirectoryOrCreate would make them on a node: root's, 0755.
  install -d -m 0755 "$node_dir/probe-socket" "$node_dir/probe-library"
  cat >"$node_dir/env" <<ENV
BIN_DIR=$bin_dir
NODE_NAME=$NODE_NAME
KUBELET_PORT=$(free_port)
KUBELET_HEALTHZ_PORT=$(free_port)
POD_RESOURCES_SOCKET=$node_dir/kubelet/pod-resources/kubelet.sock
CONTAINERD_SOCKET=$node_dir/containerd/containerd.sock
ENV
  # shellcheck disable=SC1091
  . "$node_dir/env"
  # Version 2 is what containerd 1.6 reads. The VM lacks CAP_SYS_RESOURCE: without
  # restrict_oom_score_adj every sandbox fails ("can't get final child's PID from pipe: EOF").
  cat >"$node_dir/containerd.toml" <<TOML
version = 2
root = "$node_dir/containerd/root"
state = "$node_dir/containerd/state"
[grpc]
  address = "$node_dir/containerd/containerd.sock"
[ttrpc]
  address = "$node_dir/containerd/containerd.sock.ttrpc"
[debug]
  address = ""
[metrics]
  address = ""
[plugins]
  [plugins."io.containerd.internal.v1.opt"]
    path = "$node_dir/containerd/opt"
  [plugins."io.containerd.grpc.v1.cri"]
    sandbox_image = "localhost/tessera-test/pause:1"
    restrict_oom_score_adj = true
    enable_selinux = false
    [plugins."io.containerd.grpc.v1.cri".containerd]
      default_runtime_name = "runc"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
        runtime_type = "io.containerd.runc.v2"
        [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
          SystemdCgroup = false
          Root = "$node_dir/runc"
    [plugins."io.containerd.grpc.v1.cri".cni]
      bin_dir = "/usr/lib/cni"
      conf_dir = "$node_dir/cni/net.d"
TOML
  # Pods get a network namespace with loopback only: nothing is routed, nothing touches iptables.
  cat >"$node_dir/cni/net.d/10-loopback.conflist" <<'CNI'
{"cniVersion": "1.0.0", "name": "loopback-only", "plugins": [{"type": "loopback"}]}
CNI
  # Anonymous access and AlwaysAllow are for this loopback-bound test kubelet only.
  cat >"$node_dir/kubelet.yaml" <<YAML
apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
cgroupDriver: cgroupfs
failSwapOn: false
failCgroupV1: false
makeIPTablesUtilChains: false
containerRuntimeEndpoint: unix://$node_dir/containerd/containerd.sock
address: 127.0.0.1
port: $KUBELET_PORT
readOnlyPort: 0
healthzBindAddress: 127.0.0.1
healthzPort: $KUBELET_HEALTHZ_PORT
authentication:
  anonymous: {enabled: true}
  webhook: {enabled: false}
authorization: {mode: AlwaysAllow}
podLogsDir: $node_dir/pod-logs
volumePluginDir: $node_dir/volume-plugins
nodeStatusUpdateFrequency: 1s
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
evictionHard: {memory.available: "1Mi", nodefs.available: "1%", imagefs.available: "1%", nodefs.inodesFree: "1%"}
resolvConf: ""
YAML
  echo '{"resources": []}' >"$node_dir/devices.json"
}

start_namespace() {
  local d s p
  # Mount points must exist on the host; those made here (parents too) are listed for `stop`.
  for d in "${PRIVATE_DIRS[@]}"; do
    local missing=()
    p=$d
    while [ ! -e "$p" ]; do missing=("$p" "${missing[@]}"); p=$(dirname "$p"); done
    mkdir -p "$d"
    for p in "${missing[@]}"; do echo "$p" >>"$node_dir/created-dirs"; done
  done
  unshare -m --propagation private sleep infinity </dev/null >/dev/null 2>&1 &
  echo $! >"$node_dir/holder.pid"
  sleep 0.2
  for s in "${SYSCTLS[@]}"; do
    [ -e "/proc/sys/$s" ] || continue
    cat "/proc/sys/$s" >"$node_dir/sysctl/${s//\//.}"
    in_ns mount --bind "$node_dir/sysctl/${s//\//.}" "/proc/sys/$s"
  done
  in_ns mount --bind "$node_dir/device-plugins" /var/lib/kubelet/device-plugins
  in_ns mount -t tmpfs -o size=64m,mode=0755 tessera-node /var/log/containers
  in_ns mount -t tmpfs -o size=64m,mode=0711 tessera-node /run/containerd
  in_ns mount -t tmpfs -o size=1m,mode=0755 tessera-node /run/netns
  in_ns mount -t tmpfs -o size=1m,mode=0755 tessera-node /var/lib/cni
  in_ns mount --bind "$node_dir/probe-socket" /run/tessera
  in_ns mount --bind "$node_dir/probe-library" /opt/tessera/lib
}

# Processes left in the node's cgroups (a container whose shim was killed), by pid.
kill_cgroup_members() {
  local f pid
  for f in /sys/fs/cgroup/pids/kubepods /sys/fs/cgroup/memory/kubepods; do
    [ -d "$f" ] || continue
    find "$f" -name cgroup.procs -exec cat {} + 2>/dev/null | sort -u | while read -r pid; do
      kill -9 "$pid" 2>/dev/null || true
    done
  done
}

# The shims containerd started for this node: their command line names its socket.
shim_pids() {
  local p
  for p in /proc/[0-9]*; do
    tr '\0' ' ' 2>/dev/null <"$p/cmdline" | grep -qF -- "-address $node_dir/containerd/containerd.sock" \
      && echo "${p#/proc/}"
  done
  return 0
}

remove_cgroups() {
  local root
  for root in /sys/fs/cgroup/*/kubepods; do
    [ -d "$root" ] || continue
    # Deepest first; a cgroup dir is removed with rmdir, never rm -r.
    find "$root" -depth -type d -exec rmdir {} \; 2>/dev/null || true
  done
  for root in /sys/fs/cgroup/*/kubepods; do
    [ -d "$root" ] && { log "cgroup $root could not be removed" >&2; return 1; }
  done
  return 0
}

case $cmd in
  start)
    bin_dir=${3:?bin dir}
    images=${4:?folder of OCI image archives}
    mkdir -p "$node_dir"
    write_configs "$bin_dir"
    start_namespace
    start_containerd
    for a in "$images"/*.tar; do ctr_ images import --all-platforms "$a" >/dev/null; done
    log "images: $(ctr_ images ls -q | tr '\n' ' ')"
    start_kubelet
    start_device_plugin
    wait_for kubelet "node Ready" 60 "$node_dir/kubelet.pid" \
      sh -c "kubectl --kubeconfig '$dir/admin.kubeconfig' get node '$NODE_NAME' -o jsonpath='{.status.conditions[?(@.type==\"Ready\")].status}' | grep -qx True"
    ;;
  restart-kubelet)
    stop_pid "$node_dir/kubelet.pid"
    start_kubelet
    ;;
  restart-containerd)
    stop_pid "$node_dir/containerd.pid"
    start_containerd
    ;;
  stop)
    [ -d "$node_dir" ] || exit 0
    stop_pid "$node_dir/device-plugin.pid"
    stop_pid "$node_dir/kubelet.pid"
    stop_pid "$node_dir/containerd.pid"
    for pid in $(shim_pids); do kill "$pid" 2>/dev/null || true; done
    sleep 0.5
    for pid in $(shim_pids); do kill -9 "$pid" 2>/dev/null || true; done
    kill_cgroup_members
    stop_pid "$node_dir/holder.pid"
    # The namespace is gone with its last process, and its mounts with it.
    remove_cgroups || true
    if [ -f "$node_dir/created-dirs" ]; then
      # Deepest first: they were listed parents first.
      tac "$node_dir/created-dirs" | while read -r d; do rmdir "$d" || true; done
      rm -f "$node_dir/created-dirs"
    fi
    ;;
  *) echo "unknown command $cmd" >&2; exit 2 ;;
esac

#!/usr/bin/env bash
# What the node tier must leave as it found it, written to a folder so that two can be compared:
#
#   machine-state.sh snapshot DIR          # sysctls, mounts, iptables, cgroups, host paths
#   machine-state.sh compare BEFORE AFTER  # prints each difference; exit 1 if any
#
# Values that move on their own (entropy, the last PID, dentry and inode counts) are left out.
# Interfaces that other tests on a shared machine create and remove (podman's veths) are left out
# of the sysctl keys; a value changed under a key present both times always counts.
set -euo pipefail
cmd=${1:?snapshot|compare}

# Paths the kubelet, containerd, runc and CNI use by default, whatever their configuration, and
# the CUDA probe's host paths (deploy/overlays/cuda-probe), which node.sh keeps private.
HOST_PATHS=(/var/lib/kubelet /var/lib/kubelet/device-plugins /var/log/containers /var/log/pods
  /run/containerd /run/netns /var/run/netns /var/lib/containerd /opt/containerd /etc/cni /opt/cni
  /var/lib/cni /etc/kubernetes /usr/libexec/kubernetes /run/runc /run/tessera /opt/tessera)

snapshot() {
  local out=$1
  mkdir -p "$out"
  sysctl -a 2>/dev/null | awk -F ' = ' '
    $1 ~ /^fs\.(dentry-state|file-nr|inode-nr|inode-state|aio-nr|quota\.)/ { next }
    $1 ~ /^kernel\.(ns_last_pid|random\.|pty\.nr)/ { next }
    $1 ~ /^net\.netfilter\.nf_conntrack_count/ { next }
    $1 ~ /^net\.ipv[46]\.(conf|neigh)\.(veth|podman|cni)/ { next }
    { print }' >"$out/sysctl.txt"
  # Mount point, type, source and options: the mount IDs of an unchanged table are the same,
  # but the other fields say more when a line differs.
  awk '{ sep = 0; for (i = 7; i <= NF; i++) if ($i == "-") { sep = i; break }
         print $5, $(sep + 1), $(sep + 2), $6 }' /proc/self/mountinfo | sort >"$out/mounts.txt"
  : >"$out/iptables.txt"
  local t
  for t in iptables-save ip6tables-save; do
    command -v "$t" >/dev/null || continue
    # Counters and the generated-at comments change with traffic and time, not with rules.
    "$t" 2>/dev/null | grep -v '^#' | sed 's/\[[0-9]*:[0-9]*\]//' >>"$out/iptables.txt" || true
  done
  find /sys/fs/cgroup -mindepth 1 -maxdepth 2 -type d -name 'kubepods*' 2>/dev/null | sort >"$out/cgroups.txt"
  : >"$out/paths.txt"
  local p
  for p in "${HOST_PATHS[@]}"; do
    if [ -e "$p" ] || [ -L "$p" ]; then echo "$p exists"; else echo "$p absent"; fi >>"$out/paths.txt"
  done
}

compare() {
  local before=$1 after=$2 f bad=0
  for f in sysctl mounts iptables cgroups paths; do
    if ! diff -u "$before/$f.txt" "$after/$f.txt" >"$after/$f.diff"; then
      echo "machine-state: $f changed:"
      grep '^[-+][^-+]' "$after/$f.diff" | head -20 | sed 's/^/    /'
      bad=1
    fi
  done
  return $bad
}

case $cmd in
  snapshot) snapshot "${2:?dir}" ;;
  compare) compare "${2:?before}" "${3:?after}" ;;
  *) echo "unknown command $cmd" >&2; exit 2 ;;
esac

#!/bin/bash
# On a GPU host: the CUDA probe inside containers, and what CUDA does with an injection
# library that cannot load. One device call of about 5 minutes on one GPU. From the repo root:
#   cargo build --release -p tessera && cargo build --release -p tessera --example fake_cluster && bash lab/device/containers/build.sh   # here
#   OUT=$OUT bash lab/device/containers/run.sh                                                       # there
#   carry: target/release/tessera target/release/examples/fake_cluster target/probe target/ctr-inject
# Writes to $OUT (7 files): host.txt (what the host allows: systemd, cgroup v2 and delegation,
# namespaces, runc, overlayfs), inject.md (inject.py's table), summary.md (summary.py's table),
# phases.jsonl, reads.jsonl, logs.tgz (driver, tessera, tenants), records.tar.xz (every tenant's
# kernel records, TESSERA_PROBE_RECORD_LOG; CTR_RECORD_LOG=0 leaves them off).
# DRY=1: the plumbing without a GPU, here, as root (the fake NVML, the stand-in CUPTI, tenants
# that sleep): cargo build -p tessera -p fake-nvml -p fake-cupti && cargo build -p tessera --example fake_cluster, then
#   DRY=1 OUT=/tmp/ctr-dry TESSERA=target/debug/tessera FAKE_CLUSTER=target/debug/examples/fake_cluster \
#     bash lab/device/containers/run.sh
# CTR_PHASES (time-sliced,mps; mps-apart adds the MPS pair half a period apart),
# CTR_INJECT=0 (skip inject.py), CTR_PLANT (socket-0600, no-env: a
# planted fault, scripts/test-probe-namespaces.sh) narrow it. Never changes GPU settings. MPS runs with private pipe and log folders under /tmp and is quit
# before the script ends, whatever happens. /run/tessera and /opt/tessera/lib are made if
# missing and removed at the end; the tenants' cgroups too.
set -u
ROOT=$(cd "$(dirname "$0")/../../.." && pwd)
: "${OUT:?}"
mkdir -p "$OUT" && OUT=$(cd "$OUT" && pwd)
TESSERA=${TESSERA:-$ROOT/target/release/tessera}
PROBE=${PROBE:-$ROOT/target/probe/libtessera_probe.so}
FAKE_CLUSTER=${FAKE_CLUSTER:-$ROOT/target/release/examples/fake_cluster}
export GPU=${GPU:-0} PYTHONUNBUFFERED=1
quit_mps() {
  [ -n "${DRY:-}" ] && return
  echo quit | CUDA_MPS_PIPE_DIRECTORY=/tmp/ctr-mps-pipe nvidia-cuda-mps-control >/dev/null 2>&1 || true
}
trap quit_mps EXIT
dry=()
if [ -n "${DRY:-}" ]; then
  export NVML_LIBRARY=${NVML_LIBRARY:-$ROOT/target/debug/libfake_nvml.so}
  export TESSERA_PROBE_CUPTI=${TESSERA_PROBE_CUPTI:-$ROOT/target/probe/libfake_cupti.so}
  dry=(--dry)
fi
for f in "$TESSERA" "$FAKE_CLUSTER" "$PROBE" $([ "${CTR_INJECT:-1}" = 0 ] || echo "$ROOT/target/ctr-inject/init_fails.so"); do
  [ -e "$f" ] || { echo "missing $f: build and carry it (see the head of this script)"; exit 2; }
done
COMMIT=${COMMIT:-$(git -C "$ROOT" rev-parse HEAD 2>/dev/null || echo unknown)}

# --- what the host allows
{
  echo "date: $(date -u +%FT%TZ)  commit: $COMMIT"
  echo "kernel: $(uname -r)  id: $(id)"
  echo "pid 1: $(cat /proc/1/comm 2>/dev/null) ($(readlink /proc/1/exe 2>/dev/null)); systemctl: $(systemctl is-system-running 2>&1 | head -1)"
  echo "/sys/fs/cgroup: $(stat -fc %T /sys/fs/cgroup 2>&1); controllers: $(cat /sys/fs/cgroup/cgroup.controllers 2>&1)"
  echo "subtree_control: $(cat /sys/fs/cgroup/cgroup.subtree_control 2>&1)"
  echo "own cgroup: $(cat /proc/self/cgroup 2>&1 | tr '\n' ' ')"
  t=/sys/fs/cgroup/tessera-probe-check
  if [ "$(stat -fc %T /sys/fs/cgroup 2>/dev/null)" != cgroup2fs ]; then echo "cgroup v2: not mounted at /sys/fs/cgroup"
  elif mkdir "$t" 2>/dev/null; then
    # A child shell moves itself, so this script's own cgroup stays as it was.
    if sh -c "echo \$\$ >$t/cgroup.procs" 2>/dev/null; then echo "cgroup v2: can make a cgroup and move a process into it"
    else echo "cgroup v2: can make a cgroup, cannot move a process into it"; fi
    rmdir "$t" 2>/dev/null || echo "cgroup $t left"
  else echo "cgroup v2: cannot make a cgroup under /sys/fs/cgroup"; fi
  for ns in "--pid --fork" "--mount" "--cgroup" "--user" "--net" "--ipc"; do
    # shellcheck disable=SC2086
    if unshare $ns true 2>/dev/null; then echo "unshare $ns: ok"; else echo "unshare $ns: refused"; fi
  done
  echo "runc: $(command -v runc || echo none); containerd: $(command -v containerd || echo none); podman: $(command -v podman || echo none); kubelet: $(command -v kubelet || echo none)"
  o=$(mktemp -d)
  mkdir -p "$o"/{l,u,w,m}
  if mount -t overlay overlay -o "lowerdir=$o/l,upperdir=$o/u,workdir=$o/w" "$o/m" 2>/dev/null; then
    echo "overlayfs: mounts"; umount "$o/m"
  else echo "overlayfs: refused"; fi
  rm -rf "$o"
  echo "glibc: $(ldd --version 2>&1 | head -1)"
  echo "root filesystem: $(stat -fc %T / 2>&1); /tmp: $(stat -fc %T /tmp 2>&1); /run: $(stat -fc %T /run 2>&1)"
  [ -n "${DRY:-}" ] || nvidia-smi -i "$GPU" --query-gpu=name,uuid,driver_version,compute_mode,clocks.sm --format=csv 2>&1
  [ -n "${DRY:-}" ] || python3 -c "import torch; print('torch', torch.__version__, 'cuda', torch.version.cuda)" 2>&1 | tail -1
} >"$OUT/host.txt" 2>&1
cat "$OUT/host.txt"

# --- what CUDA does with an injection library that cannot load
if [ "${CTR_INJECT:-1}" != 0 ]; then
  timeout -k 10 150 python3 "$ROOT/lab/device/containers/inject.py" --libs "$ROOT/target/ctr-inject" \
    --probe "$PROBE" --out "$OUT/inject.md" "${dry[@]}" >"$OUT/inject.log" 2>&1
  echo "inject exit $?"; cat "$OUT/inject.md"
fi

# --- CUPTI: the policy sets no TESSERA_PROBE_CUPTI, so the probe finds CUPTI by its sonames.
# It does when the tenant's process already has it loaded (the soname then matches).
if [ -z "${DRY:-}" ]; then
  loaded=$(python3 -c '
import torch
torch.ones(1, device="cuda")
print(sorted({l.split()[-1] for l in open("/proc/self/maps") if "libcupti" in l} or [""])[0])' 2>/dev/null)
  if [ -n "$loaded" ]; then
    echo "CUPTI in a PyTorch CUDA process: already loaded ($loaded): the probe finds it with the policy's setting alone" | tee -a "$OUT/host.txt"
  else
    found=$(python3 -c '
import glob, os, torch
d = os.path.dirname(os.path.dirname(torch.__file__))
print((sorted(glob.glob(d + "/nvidia/cuda_cupti/lib/libcupti.so*")) or [""])[0])' 2>/dev/null)
    [ -n "$found" ] || found=$(find /usr /opt -name 'libcupti.so*' 2>/dev/null | sort | tail -1)
    export TESSERA_PROBE_CUPTI=$found
    echo "CUPTI in a PyTorch CUDA process: not loaded; the policy's setting alone would leave the probe silent; TESSERA_PROBE_CUPTI=$found for this run" | tee -a "$OUT/host.txt"
  fi
fi

# --- the probe in containers
mkdir -p /tmp/ctr-run
timeout -k 10 300 python3 "$ROOT/lab/device/containers/driver.py" --out "$OUT" --tessera "$TESSERA" \
  --probe "$PROBE" --fake-cluster "$FAKE_CLUSTER" --gpu "$GPU" --commit "$COMMIT" "${dry[@]}" \
  2>"$OUT/driver.log"
echo "driver exit $?"
# A driver cut off by the timeout leaves its children (each in its own session): end them by pid.
while read -r pid; do kill -- -"$pid" 2>/dev/null; done </tmp/ctr-run/pids 2>/dev/null
quit_mps
tail -5 "$OUT/driver.log"
rec=()
[ -d /tmp/ctr-run/rec ] && [ -z "${DRY:-}" ] && rec=(/tmp/ctr-run/rec)
python3 "$ROOT/lab/device/containers/summary.py" "$OUT" "${rec[@]}" >"$OUT/summary.md" 2>&1
# What each tenant's own kernel records say beside it: its kernels' time, how long they ran by
# place in the period, and what the pair's spans count twice.
if [ -d /tmp/ctr-run/rec ] && [ -z "${DRY:-}" ]; then
  { echo; echo '```'; python3 "$ROOT/lab/device/containers/records.py" /tmp/ctr-run/rec 2>&1; echo '```'; } >>"$OUT/summary.md"
fi
cat "$OUT/summary.md"
cp "$OUT/driver.log" "$OUT/inject.log" /tmp/ctr-run/ 2>/dev/null
tar -czf "$OUT/logs.tgz" -C /tmp/ctr-run logs fc.txt driver.log inject.log calib.json 2>/dev/null
# The probes' kernel records (CTR_RECORD_LOG=0 leaves them off): regenerated here, never kept in git.
[ -d /tmp/ctr-run/rec ] && tar -cJf "$OUT/records.tar.xz" -C /tmp/ctr-run rec
rm -f "$OUT/driver.log" "$OUT/inject.log"
ls -la "$OUT"

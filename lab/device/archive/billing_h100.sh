#!/usr/bin/env bash
# Two processes in one container's cgroup on a GPU only that container holds: tessera should
# give the container the GPU's own reading (sole-active-container) while the processes' shares
# stay withheld; a third process outside the pod must end that (withheld). Run through the
# `device` tool from a folder holding `tessera`, `fake_cluster` (examples/fake_cluster.rs),
# `load.py` and this script. Never changes GPU settings.
set -u
# The measurements read per-process and other full-detail families.
export TESSERA_METRICS_DETAIL=full
OUT=${OUT:-/tmp/tessera-billing}; mkdir -p "$OUT"
D=$(cd "$(dirname "$0")" && pwd)
T=$(mktemp -d); PORT=19951; URL=http://127.0.0.1:$PORT
PIDS=(); LP=()
cleanup() {
  for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null; done
  wait 2>/dev/null
  [ -n "${CG:-}" ] && rmdir "$CG" 2>/dev/null
}
trap cleanup EXIT
UUID=$(nvidia-smi --query-gpu=uuid --format=csv,noheader | head -1)
"$D/fake_cluster" "$T" h100 "$UUID" > "$T/fc.txt" 2> "$OUT/fake_cluster.log" & PIDS+=($!)
for _ in $(seq 100); do grep -q SOCKET "$T/fc.txt" 2>/dev/null && break; sleep 0.1; done
REL=$(awk '/^CGROUP/{print $2}' "$T/fc.txt")
echo "kernel $(uname -r); /sys/fs/cgroup is $(stat -fc %T /sys/fs/cgroup 2>&1); my cgroup $(cat /proc/self/cgroup)"
CG=/sys/fs/cgroup$REL; MODE=real
if mkdir -p "$CG" 2> "$T/mkdir.err" && [ -w "$CG/cgroup.procs" ]; then
  echo "made $CG"
else
  echo "cannot make the cgroup: $(cat "$T/mkdir.err")"; MODE=procfs; CG=
fi
start() { # size duty
  if [ $MODE = real ]; then
    sh -c "echo \$\$ > $CG/cgroup.procs && exec python3 $D/load.py $1 $2 90" &
  else
    python3 "$D/load.py" "$1" "$2" 90 &
  fi
  PIDS+=($!); LP+=($!)
}
start 4096 0.5
start 2048 0.3
sleep 1
for p in "${LP[@]}"; do echo "pid $p: $(cat /proc/$p/cgroup 2>&1)"; done
EXTRA=()
if [ $MODE = procfs ]; then
  P=$T/proc; mkdir -p "$P"
  for p in "${LP[@]}"; do
    mkdir -p "$P/$p"; for f in stat comm status environ; do ln -s "/proc/$p/$f" "$P/$p/$f"; done
    echo "0::$REL" > "$P/$p/cgroup"
  done
  EXTRA=(--path.procfs="$P")
fi
KUBECONFIG=$T/kubeconfig "$D/tessera" --web.listen-address=127.0.0.1:$PORT --sample.interval=1s \
  --kube.node-name=h100 --kubelet.pod-resources-socket="$T/kubelet.sock" --web.enable-debug=true \
  "${EXTRA[@]}" 2> "$OUT/tessera.log" & PIDS+=($!)
sample() { # name
  curl -s $URL/metrics > "$OUT/metrics-$1.txt"
  echo "## $1 (mode $MODE) nvidia-smi util $(nvidia-smi --query-gpu=utilization.gpu --format=csv,noheader)"
  grep -E '^(gpu_utilization_ratio|gpu_compute_split_info|gpu_container_sm_utilization_ratio|gpu_pod_sm_utilization_ratio|gpu_process_sm_utilization_ratio|gpu_container_idle\{|gpu_active_containers|gpu_unattributed_utilization_ratio|gpu_compute_busy_seconds_total|gpu_compute_attributed_seconds_total|gpu_pod_attributed_seconds_total)' "$OUT/metrics-$1.txt" \
    | sed -E 's/node="h100",gpu="0",uuid="[^"]*",//'
}
sleep 20
for i in 1 2 3; do sample "two-in-one-container-$i"; sleep 4; done
curl -s $URL/debug/attribution > "$OUT/debug-attribution.json"
# A third process outside the pod: no single owner any more.
python3 "$D/load.py" 1024 0.3 40 & PIDS+=($!)
sleep 15
sample "plus-one-outside-the-pod"

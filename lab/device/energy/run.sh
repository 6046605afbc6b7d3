#!/bin/bash
# Issue 44: tessera's energy split on one GPU against each tenant's energy alone, in one device
# call of about 5.5 minutes (docs/energy-validation.md). From the repository root:
#   cargo build --release -p tessera -p tessera-probe --example fake_cluster     # here
#   OUT=$OUT GPU=0 bash lab/device/energy/run.sh                             # there
#   carry: target/release/tessera target/release/libtessera_probe.so target/release/examples/fake_cluster
# GPU: the NVML index to run on (default 0), so other experiments can use the host's other GPUs.
# A_SIZE/A_DUTY, B_SIZE/B_DUTY: the tenants (default bf16 8192² matmuls filling 50 % and 20 %).
# DRY=1: the plumbing without a GPU (the fake NVML library, sleeping tenants; figures mean
# nothing): cargo build --release -p tessera --example fake_cluster, then DRY=1 OUT=/tmp/x bash ...
# Writes to $OUT: energy.jsonl (every read), nvml.csv (the GPU's power and counter every 0.5 s),
# summary.txt (analyze.py's tables and checks), driver.log, logs.tgz.
# Never changes GPU settings. MPS runs with private pipe and log folders under /tmp and is quit
# before the script ends, whatever happens.
set -u
ROOT=$(cd "$(dirname "$0")/../../.." && pwd)
: "${OUT:?}"
mkdir -p "$OUT" && OUT=$(cd "$OUT" && pwd)
TESSERA=${TESSERA:-$ROOT/target/release/tessera}
PROBE=${PROBE:-$ROOT/target/release/libtessera_probe.so}
FAKE_CLUSTER=${FAKE_CLUSTER:-$ROOT/target/release/examples/fake_cluster}
export GPU=${GPU:-0} PYTHONUNBUFFERED=1
MPS_PIPE=/tmp/energy-mps-pipe
quit_mps() {
  [ -n "${DRY:-}" ] && return
  echo quit | CUDA_MPS_PIPE_DIRECTORY=$MPS_PIPE nvidia-cuda-mps-control >/dev/null 2>&1 || true
}
trap quit_mps EXIT
dry=()
if [ -n "${DRY:-}" ]; then
  export NVML_LIBRARY=${NVML_LIBRARY:-$ROOT/target/release/deps/libfake_nvml.so}
  PROBE=${PROBE_DRY:-/nonexistent/libtessera_probe.so}
  dry=(--dry)
fi
for f in "$TESSERA" "$FAKE_CLUSTER" ${DRY:+"$NVML_LIBRARY"}; do
  [ -e "$f" ] || { echo "missing $f: build and carry it (see the head of this script)"; exit 2; }
done
[ -n "${DRY:-}" ] || [ -e "$PROBE" ] || { echo "missing $PROBE: build and carry it"; exit 2; }
if [ -z "${COMMIT:-}" ]; then
  COMMIT=$(git -C "$ROOT" rev-parse HEAD 2>/dev/null || echo unknown)
  git -C "$ROOT" diff --quiet HEAD 2>/dev/null || COMMIT="$COMMIT+dirty"
fi
if [ -z "${DRY:-}" ]; then
  export TESSERA_PROBE_CUPTI=${TESSERA_PROBE_CUPTI:-$(find /usr /opt -name 'libcupti.so*' 2>/dev/null | sort | tail -1)}
  nvidia-smi -i "$GPU" --query-gpu=name,uuid,driver_version,pstate,clocks.sm,clocks.mem,power.draw,power.limit,temperature.gpu \
    --format=csv 2>&1 | tee "$OUT/gpu.txt"
  python3 -c "import torch; print('torch', torch.__version__, 'cuda', torch.version.cuda)" 2>&1 | tail -1
fi
rm -f /tmp/energy-probe.sock
timeout -k 10 390 python3 "$ROOT/lab/device/energy/driver.py" --out "$OUT" --tessera "$TESSERA" \
  --probe "$PROBE" --fake-cluster "$FAKE_CLUSTER" --gpu "$GPU" --commit "$COMMIT" "${dry[@]}" \
  2> "$OUT/driver.log"
echo "driver exit $?"
# A driver cut off by the timeout leaves its children (each in its own session): end them by pid.
while read -r pid; do kill -- -"$pid" 2>/dev/null; done < /tmp/energy-run/pids 2>/dev/null
quit_mps
tail -5 "$OUT/driver.log"
python3 "$ROOT/lab/device/energy/analyze.py" "$OUT/energy.jsonl" | tee "$OUT/summary.txt"
tar -czf "$OUT/logs.tgz" -C /tmp/energy-run logs fc.txt holding 2>/dev/null
ls -la "$OUT"

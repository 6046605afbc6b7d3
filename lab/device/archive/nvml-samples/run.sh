#!/bin/bash
# NVML's utilization samples against one snapshot a second, alone tenants with a known truth
# (docs/validation.md, "Device utilization from every NVML sample"). On the device machine:
#   OUT=$OUT [TESSERA=path/to/tessera] bash lab/device/archive/nvml-samples/run.sh
# With TESSERA, that build runs beside (real NVML, --sample.interval=1s) and its
# gpu_utilization_ratio is read every second too. Writes $OUT/summary.txt and $OUT/raw.tgz.
set -u
HERE=$(cd "$(dirname "$0")" && pwd)
ACC=$(cd "$HERE/../../accuracy" && pwd)   # suite.py: maintained harness
: "${OUT:?}"
WORK=$(mktemp -d)
nvidia-smi --query-gpu=name,driver_version,compute_mode,mig.mode.current --format=csv > "$WORK/card.txt" 2>&1
export KINDS="${KINDS:-infer-graph micro long xlong}"
python3 "$ACC/suite.py" calibrate "$WORK/calib.json" > "$WORK/calib.txt" 2>&1
URL=
if [ -n "${TESSERA:-}" ]; then
  "$TESSERA" --sample.interval=1s --web.listen-address=127.0.0.1:9961 --kubelet.enabled=false \
    --kube.enabled=false --kube.node-name=device > "$WORK/tessera.log" 2>&1 &
  TPID=$!
  URL=http://127.0.0.1:9961/metrics
fi
DUR=${DUR:-20}
for case in ${CASES:-"idle 0" "xlong 0.3" "long 0.3" "micro 0.2" "infer-graph 0.4" "xlong 0.1" "long 0.6"}; do
  set -- $case; kind=$1 util=$2
  start=$(python3 -c 'import time; print(time.time() + 12)')
  LOAD=
  if [ "$kind" != idle ]; then
    python3 "$ACC/suite.py" run "$kind" "$util" "$start" "$DUR" "$WORK/$kind-$util.truth.json" "$WORK/calib.json" &
    LOAD=$!
  fi
  python3 "$HERE/watch_samples.py" "$start" "$DUR" "$WORK/$kind-$util.watch.json" $URL > "$WORK/$kind-$util.watch.txt" 2>&1
  [ -n "$LOAD" ] && wait "$LOAD"
  echo "$kind $util truth=$(python3 -c "import json,sys; print(round(json.load(open(sys.argv[1]))['truth'],4))" "$WORK/$kind-$util.truth.json" 2>/dev/null || echo 0) $(cat "$WORK/$kind-$util.watch.txt")"
done | tee "$WORK/summary.txt"
[ -n "${TPID:-}" ] && kill "$TPID"
cp "$WORK/summary.txt" "$WORK/card.txt" "$WORK/calib.txt" "$OUT/"
tar -czf "$OUT/raw.tgz" -C "$WORK" .

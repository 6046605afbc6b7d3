#!/bin/bash
# Per-process GPU share under time-slicing and MPS, on a machine with one NVIDIA GPU: truth
# (processes with known duty cycles) vs raw NVML vs tessera's default vs tessera with the CUDA
# probe, plus the probe's launch overhead. Prints one JSON line per case, and one with the
# workloads' exit statuses; docs/validation.md's tables are made from them. Never changes GPU
# settings; MPS runs with private pipe/log dirs and is quit before the script ends.
#   TESSERA=path/to/tessera PROBE=path/to/libtessera_probe.so OUT=dir bash run.sh
set -u
# The measurements read per-process and other full-detail families.
export TESSERA_METRICS_DETAIL=full
cd "$(dirname "$0")"
# The watchers are maintained harness (lab/device/accuracy/); beside this script when both
# folders were carried as one.
ACC=.; [ -e watch.py ] || ACC=../../accuracy
OUT=${OUT:-./out}; mkdir -p "$OUT"
export PYTHONUNBUFFERED=1
CUPTI=$(find /usr /opt -name 'libcupti.so*' 2>/dev/null | sort | tail -1)
echo "cupti: $CUPTI" | tee "$OUT/cases.jsonl"
export TESSERA_PROBE_CUPTI=$CUPTI TESSERA_PROBE_SOCKET=/tmp/tessera-probe.sock
LONG=$(python3 duty.py calib long); TINY=$(python3 duty.py calib tiny)
echo "solo op ms: long $LONG tiny $TINY" | tee -a "$OUT/cases.jsonl"
common=(--sample.interval=1s --nvml.process-interval=1s --kubelet.enabled=false --kube.enabled=false --web.enable-debug=true)
# TESSERA_PROBE_SOCKET is also tessera's own --probe.socket mirror: keep it from the default.
env -u TESSERA_PROBE_SOCKET "$TESSERA" --web.listen-address=127.0.0.1:9949 "${common[@]}" > "$OUT/tessera-default.log" 2>&1 & T1=$!
"$TESSERA" --web.listen-address=127.0.0.1:9950 "${common[@]}" --probe.socket=$TESSERA_PROBE_SOCKET > "$OUT/tessera-probe.log" 2>&1 & T2=$!
sleep 2
# A workload that crashed at exit still wrote its figures: say so, or it goes unseen (the
# probe once crashed multi-threaded processes at exit; docs/validation.md).
exit_statuses() { # case name, then workload pids
  local name=$1 failed=0 pid; shift
  for pid in "$@"; do wait "$pid" || failed=$((failed + 1)); done
  echo "{\"case\": \"$name\", \"workloads\": $#, \"workloads_failed\": $failed}" | tee -a "$OUT/cases.jsonl"
}
opms() { [ "$1" = long ] && echo "$LONG" || echo "$TINY"; }
run_case() { # name, then pairs of duty kind
  local name=$1; shift; local start; start=$(python3 -c 'import time;print(time.time()+12)')
  local pids=() i=0
  while [ $# -gt 0 ]; do
    CUDA_INJECTION64_PATH=$PROBE python3 duty.py "$1" "$2" "$start" 24 "/tmp/$name-$i.json" "$(opms "$2")" & pids+=($!)
    i=$((i+1)); shift 2
  done
  python3 $ACC/watch.py http://127.0.0.1:9949/metrics "$start" 24 "/tmp/$name-watch.json" & local W=$!
  python3 $ACC/tessera_watch.py http://127.0.0.1:9949 "$start" 24 "/tmp/$name-default.json" & local D=$!
  python3 $ACC/tessera_watch.py http://127.0.0.1:9950 "$start" 24 "/tmp/$name-probe.json" 8 & local P2=$!
  ( sleep 14; nvidia-smi pmon -s u -d 1 -c 18 > "/tmp/$name-pmon.txt" 2>&1 ) & local P=$!
  wait $W $D $P2 $P
  exit_statuses "$name" "${pids[@]}"
  python3 summarize.py "$name" | tee -a "$OUT/cases.jsonl"
  mkdir -p "$OUT/raw"; cp /tmp/$name-*.json "$OUT/raw/" 2>/dev/null
}
# A launch-bound process alone (10 µs kernels back to back): the probe traces it in duty
# cycles; NVML's device utilization is the reference for a lone process.
# launch_case NAME [VAR=VALUE ...]: the probe's environment (launch-full traces always).
launch_case() {
  local name=$1; shift
  local start; start=$(python3 -c 'import time;print(time.time()+12)')
  env "$@" CUDA_INJECTION64_PATH=$PROBE python3 workload.py launch 24 /tmp/$name-0w.json "$start" & local L=$!
  python3 $ACC/watch.py http://127.0.0.1:9949/metrics "$start" 24 /tmp/$name-watch.json & local W=$!
  python3 $ACC/tessera_watch.py http://127.0.0.1:9950 "$start" 24 /tmp/$name-probe.json 8 & local P2=$!
  wait $W $P2
  exit_statuses "$name" $L
  python3 - "$name" <<'PY' | tee -a "$OUT/cases.jsonl"
import json, sys
w, p, q = (json.load(open(f"/tmp/{sys.argv[1]}-{n}.json")) for n in ("watch", "probe", "0w"))
pid = str(q["pid"])
print(json.dumps({"case": sys.argv[1], "device_util": w.get("device_util_0.1s"),
  "probe_share": p["busy"].get(pid), "probe_traced_pct": p.get("traced_pct"),
  "probe_methods": p["methods"], "kernels_per_s_launched": round(q["kernels"] / q["wall_s"], 1),
  "kernels_per_s_probe": p.get("kernels_per_s", {}).get(pid)}))
PY
  mkdir -p "$OUT/raw"; cp /tmp/$name-*.json "$OUT/raw/" 2>/dev/null
}
# CASES="alone-50 ts-60-20 ..." runs a subset (default: all).
want() { [ -z "${CASES:-}" ] || [[ " $CASES " == *" $1 "* ]]; }
want alone-50 && run_case alone-50 0.5 long
want ts-40-40 && run_case ts-40-40 0.4 long 0.4 long
want ts-60-20 && run_case ts-60-20 0.6 long 0.2 long
want ts-30tiny-30long && run_case ts-30tiny-30long 0.3 tiny 0.3 long
want ts-50-idleholder && run_case ts-50-idleholder 0.5 long 0 long
want ts-3x20 && run_case ts-3x20 0.2 long 0.2 long 0.2 long
want launch-alone && launch_case launch-alone
want launch-full && launch_case launch-full TESSERA_PROBE_OVERHEAD=1
export CUDA_MPS_PIPE_DIRECTORY=/tmp/mps-pipe CUDA_MPS_LOG_DIRECTORY=/tmp/mps-log
mkdir -p "$CUDA_MPS_PIPE_DIRECTORY" "$CUDA_MPS_LOG_DIRECTORY"
if { want mps-40-20 || want mps-3x20 || want mps-30tiny-30long; } && nvidia-cuda-mps-control -d; then
  want mps-40-20 && run_case mps-40-20 0.4 long 0.2 long
  want mps-3x20 && run_case mps-3x20 0.2 long 0.2 long 0.2 long
  want mps-30tiny-30long && run_case mps-30tiny-30long 0.3 tiny 0.3 long
  echo quit | nvidia-cuda-mps-control; sleep 2
fi
kill $T1; wait $T1 2>/dev/null
# Launch overhead, REPEAT (default 1) rounds, interleaved so drift hits every variant alike:
# plain; the probe with no socket (it stays off); the probe reporting to tessera (T2).
for _ in $(seq "${REPEAT:-1}"); do
  python3 overhead.py plain | tee -a "$OUT/cases.jsonl"
  TESSERA_PROBE_SOCKET=/tmp/no-such.sock CUDA_INJECTION64_PATH=$PROBE python3 overhead.py probe-no-tessera | tee -a "$OUT/cases.jsonl"
  CUDA_INJECTION64_PATH=$PROBE python3 overhead.py probe | tee -a "$OUT/cases.jsonl"
done
kill $T2; wait $T2 2>/dev/null
[ -d "$OUT/raw" ] && tar -C "$OUT" -czf "$OUT/raw.tgz" raw && rm -rf "$OUT/raw"
exit 0

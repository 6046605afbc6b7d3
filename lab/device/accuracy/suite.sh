#!/bin/bash
# Issue 21's suite: realistic tenants (suite.py) time-sliced, under MPS and alone, read by a
# tessera without the probe (:9949) and one with it (:9950), every tenant loading the probe.
# Prints one JSON line per case (suite_summary.py) with each tenant's truth, what each
# instance published, the idle verdicts, and each step of the probe's time-sliced split.
#   TESSERA=path/to/tessera PROBE=path/to/libtessera_probe.so OUT=dir [CASES="..."] [MPS=1] \
#     [BASELINE=path/to/an/earlier/tessera] [ALONE_DUR=s] bash suite.sh
# BASELINE: a third instance (:9948, no probe) from an earlier build reads the same cases, for
# its idle verdicts beside this build's. ALONE_DUR: a longer run for the alone-* cases (more
# reads of the default instance's idle verdict).
# Never changes GPU settings; MPS runs with private pipe/log dirs and is quit before the end.
set -u
# The measurements read per-process and other full-detail families.
export TESSERA_METRICS_DETAIL=full
cd "$(dirname "$0")"
OUT=${OUT:-./out}; mkdir -p "$OUT" "$OUT/raw"
export PYTHONUNBUFFERED=1
CUPTI=$(find /usr /opt -name 'libcupti.so*' 2>/dev/null | sort | tail -1)
export TESSERA_PROBE_CUPTI=$CUPTI TESSERA_PROBE_SOCKET=/tmp/tessera-probe.sock
CAL=/tmp/suite-calib.json
if [ ! -s "$CAL" ]; then
  python3 suite.py calibrate "$CAL" > "$OUT/calib.txt" 2>&1 || { cat "$OUT/calib.txt"; exit 1; }
fi
cat "$OUT/calib.txt" 2>/dev/null
cp "$CAL" "$OUT/raw/"
common=(--sample.interval=1s --nvml.process-interval=1s --kubelet.enabled=false --kube.enabled=false --web.enable-debug=true)
env -u TESSERA_PROBE_SOCKET "$TESSERA" --web.listen-address=127.0.0.1:9949 "${common[@]}" > "$OUT/raw/tessera-default.log" 2>&1 & T1=$!
"$TESSERA" --web.listen-address=127.0.0.1:9950 "${common[@]}" --probe.socket=$TESSERA_PROBE_SOCKET > "$OUT/raw/tessera-probe.log" 2>&1 & T2=$!
T0=
if [ -n "${BASELINE:-}" ]; then
  env -u TESSERA_PROBE_SOCKET "$BASELINE" --web.listen-address=127.0.0.1:9948 "${common[@]}" > "$OUT/raw/tessera-baseline.log" 2>&1 & T0=$!
fi
sleep 2
DUR=${DUR:-18}; LEAD=${LEAD:-14}
case_() { # name, then pairs: kind util
  local name=$1; shift; local start; start=$(python3 -c "import time;print(time.time()+$LEAD)")
  local DUR=$DUR; [[ $name == alone-* ]] && DUR=${ALONE_DUR:-$DUR}
  local pids=() i=0
  rm -f /tmp/$name-*.json
  while [ $# -gt 0 ]; do
    CUDA_INJECTION64_PATH=$PROBE python3 suite.py run "$1" "$2" "$start" "$DUR" "/tmp/$name-$i.json" "$CAL" & pids+=($!)
    i=$((i+1)); shift 2
  done
  python3 watch.py http://127.0.0.1:9949/metrics "$start" "$DUR" "/tmp/$name-watch.json" & local W=$!
  python3 tessera_watch.py http://127.0.0.1:9949 "$start" "$DUR" "/tmp/$name-default.json" & local D=$!
  python3 tessera_watch.py http://127.0.0.1:9950 "$start" "$DUR" "/tmp/$name-probe.json" 8 & local P=$!
  local B=
  if [ -n "$T0" ]; then python3 tessera_watch.py http://127.0.0.1:9948 "$start" "$DUR" "/tmp/$name-baseline.json" & B=$!; fi
  wait $W $D $P $B
  local failed=0 pid; for pid in "${pids[@]}"; do wait "$pid" || failed=$((failed + 1)); done
  python3 suite_summary.py "$name" "$failed" | tee -a "$OUT/suite.jsonl"
  echo "$(date -u +%T) $name done" >&2
  cp /tmp/$name-*.json "$OUT/raw/" 2>/dev/null
}
want() { [ -z "${CASES:-}" ] || [[ " $CASES " == *" $1 "* ]]; }
if [ -z "${MPS:-}" ]; then
  want alone-graph40 && case_ alone-graph40 infer-graph 0.4
  # alone, kernels from µs to ~40 ms: NVML's figure is the process's, and idle must not be
  # read from one snapshot that fell between two long kernels
  want alone-long30 && case_ alone-long30 long 0.3
  want alone-xlong30 && case_ alone-xlong30 xlong 0.3
  want alone-matmul30 && case_ alone-matmul30 matmul 0.3
  want alone-micro20 && case_ alone-micro20 micro 0.2
  want ts-graph45-matmul25 && case_ ts-graph45-matmul25 infer-graph 0.45 matmul 0.25
  want ts-4xgraph15 && case_ ts-4xgraph15 infer-graph 0.15 infer-graph 0.15 infer-graph 0.15 infer-graph 0.15
  want ts-matmul70-eager10 && case_ ts-matmul70-eager10 matmul 0.7 infer-eager 0.1
  want ts-graph40-holder && case_ ts-graph40-holder infer-graph 0.4 holder 0
  want ts-train40-eager25 && case_ ts-train40-eager25 train 0.4 infer-eager 0.25
  want ts-micro20-long30 && case_ ts-micro20-long30 micro 0.2 long 0.3
  want ts-6mixed && case_ ts-6mixed infer-graph 0.1 infer-graph 0.1 infer-eager 0.08 train 0.15 micro 0.05 matmul 0.1
  want ts-6mixed-b && case_ ts-6mixed-b infer-graph 0.1 infer-graph 0.1 infer-eager 0.08 long 0.15 micro 0.05 matmul 0.1
  want alone-train50 && case_ alone-train50 train 0.5
  want holder-alone && case_ holder-alone holder 0
  # held back: never looked at while choosing the split rule
  want ts-2xtrain30 && case_ ts-2xtrain30 train 0.3 train 0.3
  want ts-3xeager15-long20 && case_ ts-3xeager15-long20 infer-eager 0.15 infer-eager 0.15 infer-eager 0.15 long 0.2
  want ts-graph60-micro10 && case_ ts-graph60-micro10 infer-graph 0.6 micro 0.1
  want ts-3xgraph20 && case_ ts-3xgraph20 infer-graph 0.2 infer-graph 0.2 infer-graph 0.2
  want ts-graph30-eager30 && case_ ts-graph30-eager30 infer-graph 0.3 infer-eager 0.3
else
  export CUDA_MPS_PIPE_DIRECTORY=/tmp/mps-pipe CUDA_MPS_LOG_DIRECTORY=/tmp/mps-log
  mkdir -p "$CUDA_MPS_PIPE_DIRECTORY" "$CUDA_MPS_LOG_DIRECTORY"
  if nvidia-cuda-mps-control -d; then
    want mps-graph30-eager20-matmul10 && case_ mps-graph30-eager20-matmul10 infer-graph 0.3 infer-eager 0.2 matmul 0.1
    want mps-train30-graph20 && case_ mps-train30-graph20 train 0.3 infer-graph 0.2
    want mps-graph40-holder && case_ mps-graph40-holder infer-graph 0.4 holder 0
    echo quit | nvidia-cuda-mps-control; sleep 2
  fi
fi
kill $T1 $T2 $T0; wait $T1 $T2 $T0 2>/dev/null
tar -C "$OUT" -czf "$OUT/raw.tgz" raw && rm -rf "$OUT/raw"
exit 0

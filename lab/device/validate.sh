#!/usr/bin/env bash
# Validation of tessera against nvidia-smi on a real GPU (run through the `device` tool).
# Never changes GPU settings. MPS runs with private pipe/log dirs and is quit on exit.
set -u
# The measurements read per-process and other full-detail families.
export TESSERA_METRICS_DETAIL=full
OUT=${OUT:-/tmp/tessera-validate}
mkdir -p "$OUT"
BIN=${TESSERA_BIN:-target/release/tessera}
PORT=19949
URL=http://127.0.0.1:$PORT/metrics
export CUDA_MPS_PIPE_DIRECTORY=/tmp/tessera-mps/pipe CUDA_MPS_LOG_DIRECTORY=/tmp/tessera-mps/log
mkdir -p "$CUDA_MPS_PIPE_DIRECTORY" "$CUDA_MPS_LOG_DIRECTORY"
LOADS=()
cleanup() {
  [ -n "${TPID:-}" ] && kill "$TPID" 2>/dev/null
  for p in "${LOADS[@]}"; do kill "$p" 2>/dev/null; done
  wait 2>/dev/null
  echo quit | nvidia-cuda-mps-control 2>/dev/null
  [ -n "${TPID:-}" ] && kill "$TPID" 2>/dev/null
}
trap cleanup EXIT
load() { python3 lab/device/load.py "$@" & LOADS+=($!); }
stop_loads() { for p in "${LOADS[@]}"; do kill "$p" 2>/dev/null; done; wait "${LOADS[@]}" 2>/dev/null; LOADS=(); }
cpu_ticks() { awk '{print $14+$15}' /proc/"$1"/stat; }

nvidia-smi > "$OUT/nvidia-smi.txt"
"$BIN" --web.listen-address=127.0.0.1:$PORT --sample.interval=1s --kube.node-name=h100 2> "$OUT/tessera.log" &
TPID=$!
sleep 4
echo "## tessera validation on $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader)"
python3 lab/device/compare.py "idle GPU" $URL
curl -s $URL > "$OUT/metrics-idle.txt"

# Footprint while idle-scraped: one scrape every 15 s for 60 s, like Prometheus.
t0=$(cpu_ticks $TPID); for i in 1 2 3 4; do curl -s -o /dev/null $URL; sleep 15; done; t1=$(cpu_ticks $TPID)
hz=$(getconf CLK_TCK)
echo; echo "idle-scraped CPU over 60 s: $(python3 -c "print(f'{($t1-$t0)/$hz/60*100:.3f}% of a core')")"
grep -E 'VmRSS|VmHWM' /proc/$TPID/status

load 4096 0.6 60
load 2048 0.4 60
sleep 20
python3 lab/device/compare.py "two torch processes, time-sliced" $URL
curl -s $URL > "$OUT/metrics-timesliced.txt"
echo; echo "| url | p50 ms | p99 ms | bytes | series |"; echo "|---|---|---|---|---|"
c0=$(cpu_ticks $TPID); python3 lab/device/scrape_bench.py $URL 200; c1=$(cpu_ticks $TPID)
echo "CPU per scrape (incl. 1 s sampling in the background): $(python3 -c "print(f'{($c1-$c0)/$hz/200*1000:.3f} ms')")"
echo; echo "### NVML floor vs sample cycle (two processes running)"
${NVML_COST_BIN:-target/release/examples/nvml_cost} 200 2>&1
stop_loads

load 8192 1.0 30 bf16
sleep 15
python3 lab/device/compare.py "bf16 8192^2 matmul loop (GPM high)" $URL
stop_loads
sleep 3
python3 lab/device/compare.py "idle again (GPM near zero)" $URL

nvidia-cuda-mps-control -d
sleep 1
load 4096 0.6 50
load 2048 0.4 50
sleep 20
nvidia-smi > "$OUT/nvidia-smi-mps.txt"
python3 lab/device/compare.py "MPS daemon, two clients" $URL
curl -s $URL > "$OUT/metrics-mps.txt"
stop_loads
echo quit | nvidia-cuda-mps-control
grep -E 'VmRSS|VmHWM' /proc/$TPID/status
tail -5 "$OUT/tessera.log"

#!/usr/bin/env bash
# Soak: N sample cycles (default 100,000) under continuous process churn, at a 1 ms interval,
# with a scrape every 100 ms. Reports RSS and open file descriptors at the start and the end.
# Loopback only; bounded by the cycle count and a wall-clock cap.
set -euo pipefail
cd "$(dirname "$0")/.."
CYCLES=${CYCLES:-100000}
BIN=${TESSERA_BIN:-target/release/tessera}
LIB=$(dirname "$BIN")/deps/libfake_nvml.so
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
tmp=$(mktemp -d)
trap 'kill "$pid" 2>/dev/null || true; rm -rf "$tmp"' EXIT
mkdir -p "$tmp/proc"
TESSERA_FAKE_NVML_SCENARIO=tests/scenarios/soak.yaml "$BIN" --nvml.library="$LIB" --path.procfs="$tmp/proc" \
  --web.listen-address=127.0.0.1:"$port" --sample.interval=1ms --kubelet.enabled=false --kube.enabled=false \
  --log.level=warn 2>"$tmp/log" &
pid=$!
samples() { curl -s "127.0.0.1:$port/metrics" | awk '/^tessera_samples_total/ {print int($2)}'; }
# The exporter and its NVML worker processes (--nvml.isolation=process) together.
procs() { echo "$pid" $(pgrep -P "$pid" || true); }
rss() { for p in $(procs); do awk '/VmRSS/ {print $2}' "/proc/$p/status"; done | awk '{s += $1} END {print s}'; }
fds() { for p in $(procs); do ls "/proc/$p/fd"; done | wc -l; }
# waited SECONDS CONDITION...: until CONDITION holds, or says which one did not in time.
waited() {
  local limit=$(($(date +%s) + $1))
  shift
  until "$@"; do
    if [ "$(date +%s)" -ge "$limit" ] || ! kill -0 "$pid" 2>/dev/null; then
      echo "FAIL: not within the bound: $*"; tail -n 5 "$tmp/log"; exit 1
    fi
    sleep 0.2
  done
}
serving() { [ -n "$(samples 2>/dev/null)" ]; }
# Let allocators and caches reach their working size before the first reading.
warm() { local n; n=$(samples 2>/dev/null); [ "${n:-0}" -ge 2000 ]; }
waited 60 serving
waited 120 warm
s0=$(samples); r0=$(rss); f0=$(fds); t0=$(date +%s)
deadline=$((t0 + ${MAX_SECONDS:-900}))
while [ "$(samples)" -lt $((s0 + CYCLES)) ] && [ "$(date +%s)" -lt "$deadline" ]; do sleep 0.1; done
s1=$(samples); r1=$(rss); f1=$(fds); t1=$(date +%s)
restarts=$(curl -s "127.0.0.1:$port/metrics" | awk '/^tessera_nvml_worker_restarts_total/ {s += $2} END {print s + 0}')
echo "| cycles | seconds | processes | RSS start KiB | RSS end KiB | fds start | fds end | worker restarts |"
echo "|---|---|---|---|---|---|---|---|"
echo "| $((s1 - s0)) | $((t1 - t0)) | $(procs | wc -w) | $r0 | $r1 | $f0 | $f1 | $restarts |"
# Flat means: RSS grew by less than 10 % and no descriptor leaked; and no NVML worker died.
if [ "$r1" -gt $((r0 + r0 / 10)) ] || [ "$f1" -gt "$f0" ] || [ "$restarts" != 0 ]; then echo "FAIL: growth"; exit 1; fi
echo "1 passed, 0 failed"

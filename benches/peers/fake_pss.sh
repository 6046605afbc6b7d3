#!/usr/bin/env bash
# PSS of tessera and every process it started, against the fake NVML (no GPU needed): what the
# exporter's own code costs in each --nvml.isolation mode as GPUs are added. The real driver
# library adds its own memory per process that loads it (benches/peers/footprint.sh measures
# that on GPUs).
#
#   TESSERA_BIN=target/release/tessera bash benches/peers/fake_pss.sh [GPU counts...]
#
# For each GPU count (default 1 2 4 8) and mode, RUNS runs (default 3): start tessera on a
# scenario of that many H100s with one process, scrape it, wait 10 s, sum Pss and Rss of
# /proc/PID/smaps_rollup over the process tree. Prints one markdown table of medians.
set -euo pipefail
cd "$(dirname "$0")/../.."
BIN=${TESSERA_BIN:-target/release/tessera}
LIB=${FAKE_NVML:-$(dirname "$BIN")/deps/libfake_nvml.so}
RUNS=${RUNS:-3}
counts=("$@")
[ ${#counts[@]} -gt 0 ] || counts=(1 2 4 8)
tmp=$(mktemp -d)
pid=
trap '[ -n "$pid" ] && kill "$pid" 2>/dev/null; rm -rf "$tmp"' EXIT
mkdir -p "$tmp/proc"

tree() { # the process and everything below it
  local p=$1 t c kids
  echo "$p"
  for t in /proc/"$p"/task/*; do
    kids=()
    # The file is one line without a newline: read fails at its end having read it.
    read -ra kids <"$t/children" 2>/dev/null || true
    for c in "${kids[@]}"; do tree "$c"; done
  done
}

one() { # gpus mode -> "pss_kib rss_kib processes"
  local n=$1 mode=$2 port
  {
    echo "gpus:"
    for ((i = 0; i < n; i++)); do echo "  - { sku: h100-80gb-hbm3 }"; done
    echo "phases:"
    echo "  - at_ms: 0"
    echo "    processes:"
    echo "      - { pid: 8001, gpu: 0, comm: python3, memory_mib: 1000, sm_util: 50 }"
  } >"$tmp/scenario.yaml"
  port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
  TESSERA_FAKE_NVML_SCENARIO=$tmp/scenario.yaml "$BIN" --nvml.library="$LIB" \
    --path.procfs="$tmp/proc" --web.listen-address=127.0.0.1:"$port" --sample.interval=1s \
    --kubelet.enabled=false --kube.enabled=false --nvml.isolation="$mode" 2>"$tmp/log" &
  pid=$!
  until curl -fs "127.0.0.1:$port/metrics" >/dev/null; do sleep 0.2; done
  sleep 10
  curl -fs "127.0.0.1:$port/metrics" >/dev/null
  local pss=0 rss=0 procs=0 p
  for p in $(tree "$pid"); do
    pss=$((pss + $(awk '/^Pss:/ {print $2}' "/proc/$p/smaps_rollup")))
    rss=$((rss + $(awk '/^Rss:/ {print $2}' "/proc/$p/smaps_rollup")))
    procs=$((procs + 1))
  done
  kill "$pid"
  wait "$pid" 2>/dev/null || true
  pid=
  echo "$pss $rss $procs"
}

median() { sort -n | awk '{a[NR] = $1} END {print a[int((NR + 1) / 2)]}'; }

echo "| --nvml.isolation | GPUs | processes | PSS MiB | RSS MiB (sum) |"
echo "|---|---|---|---|---|"
for mode in process thread; do
  for n in "${counts[@]}"; do
    : >"$tmp/runs"
    for ((r = 0; r < RUNS; r++)); do one "$n" "$mode" >>"$tmp/runs"; done
    pss=$(cut -d' ' -f1 "$tmp/runs" | median)
    rss=$(cut -d' ' -f2 "$tmp/runs" | median)
    procs=$(cut -d' ' -f3 "$tmp/runs" | median)
    awk -v m="$mode" -v n="$n" -v c="$procs" -v p="$pss" -v r="$rss" \
      'BEGIN {printf "| %s | %d | %d | %.1f | %.1f |\n", m, n, c, p / 1024, r / 1024}'
  done
done

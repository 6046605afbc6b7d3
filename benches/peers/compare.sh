#!/usr/bin/env bash
# Side-by-side footprint of tessera and its peers on one GPU, under the same load: two torch
# processes, 1 s sample interval for every exporter, a scrape every 15 s, then a burst of
# sequential scrapes. Runs on the `device` machine. Prints one markdown table last.
#
#   carry: .peers/ — stripped tessera and nvml_cost (TESSERA_BIN, NVML_COST_BIN), the all-smi
#          binary with the libdrm*.so.* it needs, and nvitop-exporter's wheels (.peers/wheels)
set -uo pipefail
cd "$(dirname "$0")/../.."
IDLE=${IDLE_SECONDS:-90}
BURST=${BURST:-200}
PEERS=${PEERS_DIR:-.peers}
OUT=${OUT:-/tmp/peers}
mkdir -p "$OUT"
LOADS=()
PIDS=()
cleanup() {
  for p in "${PIDS[@]}" "${LOADS[@]}"; do kill "$p" 2>/dev/null; done
  wait 2>/dev/null
}
trap cleanup EXIT
for args in "4096 0.6" "2048 0.4"; do
  # shellcheck disable=SC2086
  python3 lab/device/load.py $args 3600 & LOADS+=($!)
done
sleep 8
results="$OUT/results.jsonl"
: > "$results"

run() { # name url cmd...
  local name=$1 url=$2; shift 2
  "$@" > "$OUT/$name.log" 2>&1 &
  local pid=$!
  PIDS+=("$pid")
  python3 benches/peers/measure.py "$name" "$pid" "$url" "$IDLE" "$BURST" | tee -a "$results"
  kill "$pid" 2>/dev/null; wait "$pid" 2>/dev/null
}

TESSERA=${TESSERA_BIN:-target/release/tessera}
NVML_COST=${NVML_COST_BIN:-target/release/examples/nvml_cost}
run tessera http://127.0.0.1:9949/metrics "$TESSERA" --web.listen-address=127.0.0.1:9949 \
  --sample.interval=1s --kubelet.enabled=false --kube.enabled=false
# The same with per-process utilization read every cycle, as the peers do.
if [ -z "${SKIP_EVERY_CYCLE:-}" ]; then
  run "tessera --nvml.process-interval=1s" http://127.0.0.1:9949/metrics "$TESSERA" \
    --web.listen-address=127.0.0.1:9949 --sample.interval=1s --nvml.process-interval=1s \
    --kubelet.enabled=false --kube.enabled=false
fi

if [ -d "$PEERS/wheels" ]; then
  python3 -m pip install -q --no-index --find-links "$PEERS/wheels" --target /tmp/nvitop-site nvitop-exporter >/dev/null 2>&1
  run nvitop-exporter http://127.0.0.1:9101/metrics env PYTHONPATH=/tmp/nvitop-site \
    python3 -c 'from nvitop_exporter.cli import main; main()' --bind-address 127.0.0.1 --port 9101 --interval 1.0
fi
if [ -x "$PEERS/all-smi" ]; then
  run all-smi http://127.0.0.1:9102/metrics env LD_LIBRARY_PATH="$PEERS" "$PEERS/all-smi" api --port 9102 --interval 1 --processes=true
fi
python3 benches/peers/nvidia_smi_cost.py | tee -a "$results"

echo; echo "### NVML floor vs tessera's sample cycle"
"$NVML_COST" 200 2>&1 | tail -36

echo; echo "### Footprint, same GPU, same load ($(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader))"
python3 - "$results" <<'PY'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
f = lambda v, d=2: "—" if v is None else f"{v:.{d}f}"
print("| exporter | idle CPU (% of a core) | RSS MiB | anon / file MiB | peak RSS MiB | threads | scrape p50 / p99 ms | CPU ms per scrape | bytes | series |")
print("|---|---|---|---|---|---|---|---|---|---|")
for r in rows:
    if "error" in r:
        print(f"| {r['name']} | {r['error']} |  |  |  |  |  |  |  |  |"); continue
    print(f"| {r['name']} | {f(r.get('idle_cpu_pct'), 3)} | {f(r.get('rss_mib'), 1)} | "
          f"{f(r.get('rss_anon_mib'), 1)} / {f(r.get('rss_file_mib'), 1)} | {f(r.get('peak_rss_mib'), 1)} | {r.get('threads', '—')} | "
          f"{f(r.get('p50_ms'))} / {f(r.get('p99_ms'))} | {f(r.get('cpu_ms_per_scrape'), 3)} | {r.get('bytes', '—')} | {r.get('series', '—')} |")
PY

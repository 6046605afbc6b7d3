#!/usr/bin/env bash
# tessera's footprint beside nvitop-exporter on however many GPUs this machine has (issue 46):
# tessera with its defaults (NVML in one worker process), tessera --nvml.isolation=thread and
# nvitop-exporter 1.7.2, one after the other under the same load: two CUDA processes
# (lab/device/load.py) on the first and the last GPU. Each exporter samples once a second
# and is measured alone (benches/peers/measure.py): IDLE_SECONDS scraped every 15 s (idle CPU,
# PSS and RSS of the exporter and every process it started, CPU by thread), then BURST
# sequential scrapes (latency, CPU per scrape). Then COST_SECONDS of tessera's defaults at
# --metrics.detail=full, to read what each NVML call costs (tessera_nvml_call_*).
#
# Neither tessera nor nvitop-exporter can be limited to some of a machine's GPUs, so the 1-, 2-
# and 4-GPU rows come from machines with that many GPUs: run this once on each.
#
#   carry: .peers/tessera (stripped release build) and .peers/wheels/ (nvitop-exporter 1.7.2,
#          nvitop 1.7.2, nvidia-ml-py, psutil, prometheus-client: docs/benchmarks.md says how
#          they were downloaded)
#   OUT=/some/dir bash benches/peers/footprint.sh
#
# Writes 8 files to $OUT: results.jsonl (one line per exporter), costs.json (per NVML call),
# summary.md (the tables), setup.log (pip, loads) and one log per tessera or nvitop run; prints
# the markdown table last. Changes no GPU setting. Takes about 4.5 minutes at the defaults.
set -uo pipefail
cd "$(dirname "$0")/../.." || exit 1
IDLE=${IDLE_SECONDS:-60}
BURST=${BURST:-200}
COST=${COST_SECONDS:-30}
PEERS=${PEERS_DIR:-.peers}
OUT=${OUT:-/tmp/footprint}
TESSERA=${TESSERA_BIN:-$PEERS/tessera}
# The GPU load; a dry run without a GPU passes LOAD_CMD=sleep (it sums its arguments).
LOAD_CMD=${LOAD_CMD:-python3 lab/device/load.py}
mkdir -p "$OUT"
started=$(date +%s)
LOADS=()
PIDS=()
cleanup() {
  for p in "${PIDS[@]}" "${LOADS[@]}"; do kill "$p" 2>/dev/null; done
  wait 2>/dev/null
}
trap cleanup EXIT

gpus=$(nvidia-smi --query-gpu=index --format=csv,noheader | wc -l)
model=$(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | head -n 1)
echo "### $gpus × $model"
last=$((gpus - 1))
# LOAD_GPUS=0 leaves every other GPU quiet (the shape of the 4-GPU run, on 2 GPUs).
specs=("0 4096 0.6" "$last 2048 0.4")
[ "${LOAD_GPUS:-}" = 0 ] && specs=("0 4096 0.6" "0 2048 0.4")
for spec in "${specs[@]}"; do
  read -r gpu size busy <<<"$spec"
  # shellcheck disable=SC2086
  CUDA_VISIBLE_DEVICES=$gpu $LOAD_CMD "$size" "$busy" 3600 >>"$OUT/setup.log" 2>&1 &
  LOADS+=($!)
done

site=$(mktemp -d)
python3 -m pip install -q --no-index --no-deps --target "$site" "$PEERS"/wheels/*.whl \
  >>"$OUT/setup.log" 2>&1 || echo "nvitop-exporter did not install (see setup.log)"
# The loads have their CUDA contexts before anything is measured.
sleep 10

results="$OUT/results.jsonl"
: >"$results"
run() { # name url log cmd...
  local name=$1 url=$2 log=$3
  shift 3
  "$@" >"$OUT/$log" 2>&1 &
  local pid=$!
  PIDS+=("$pid")
  python3 benches/peers/measure.py "$name" "$pid" "$url" "$IDLE" "$BURST" >>"$results"
  kill "$pid" 2>/dev/null
  wait "$pid" 2>/dev/null
  echo "  measured $name ($(($(date +%s) - started)) s in)"
}
common=(--web.listen-address=127.0.0.1:9949 --sample.interval=1s
  --kubelet.enabled=false --kube.enabled=false)
# TESSERA_BEFORE_BIN: an older build measured first, side by side under the same load.
if [ -n "${TESSERA_BEFORE_BIN:-}" ]; then
  run "tessera ${BEFORE_LABEL:-before} (default)" http://127.0.0.1:9949/metrics tessera-before.log \
    "$TESSERA_BEFORE_BIN" "${common[@]}"
fi
run "tessera (default: one NVML worker)" http://127.0.0.1:9949/metrics tessera-default.log \
  "$TESSERA" "${common[@]}"
run "tessera --nvml.isolation=thread" http://127.0.0.1:9949/metrics tessera-thread.log \
  "$TESSERA" "${common[@]}" --nvml.isolation=thread
run "nvitop-exporter 1.7.2" http://127.0.0.1:9101/metrics nvitop-exporter.log \
  env PYTHONPATH="$site" python3 -m nvitop_exporter --bind-address 127.0.0.1 --port 9101 --interval 1.0

# What each NVML call costs, from tessera's own counters (full detail serves them).
"$TESSERA" "${common[@]}" --metrics.detail=full >"$OUT/tessera-costs.log" 2>&1 &
cost_pid=$!
PIDS+=("$cost_pid")
python3 - "$cost_pid" "$COST" "$gpus" "$OUT/costs.json" <<'PY'
import json, os, re, sys, time, urllib.request
pid, seconds, gpus, out = int(sys.argv[1]), float(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
URL = "http://127.0.0.1:9949/metrics"
LINE = re.compile(r'^(tessera_nvml_calls_total|tessera_nvml_call_cpu_seconds_total|tessera_nvml_call_seconds_total)\{.*call="([^"]*)".*\} (\S+)$')

def read():
    body = urllib.request.urlopen(URL, timeout=10).read().decode()
    got = {}
    for line in body.splitlines():
        m = LINE.match(line)
        if m:
            got.setdefault(m.group(2), {})[m.group(1)] = float(m.group(3))
    return got

def tree_cpu(root):
    hz, total, todo = os.sysconf("SC_CLK_TCK"), 0.0, [root]
    while todo:
        p = todo.pop()
        try:
            f = open(f"/proc/{p}/stat").read().rsplit(")", 1)[1].split()
            total += (int(f[11]) + int(f[12])) / hz
            for t in os.listdir(f"/proc/{p}/task"):
                todo += [int(c) for c in open(f"/proc/{p}/task/{t}/children").read().split()]
        except OSError:
            pass
    return total

deadline = time.time() + 60
while True:
    try:
        read()
        break
    except Exception:
        if time.time() > deadline:
            json.dump({"error": "never served"}, open(out, "w"))
            sys.exit(0)
        time.sleep(0.5)
time.sleep(5)
a, c0, t0 = read(), tree_cpu(pid), time.time()
time.sleep(seconds)
b, c1, wall = read(), tree_cpu(pid), time.time() - t0
rows = []
for call, v in b.items():
    w = a.get(call, {})
    d = lambda k: v.get(k, 0.0) - w.get(k, 0.0)
    calls = d("tessera_nvml_calls_total")
    rows.append({
        "call": call,
        "calls_per_s": calls / wall,
        "cpu_ms_per_s": d("tessera_nvml_call_cpu_seconds_total") * 1e3 / wall,
        "wall_ms_per_s": d("tessera_nvml_call_seconds_total") * 1e3 / wall,
        "cpu_us_per_call": d("tessera_nvml_call_cpu_seconds_total") * 1e6 / calls if calls else None,
        "wall_us_per_call": d("tessera_nvml_call_seconds_total") * 1e6 / calls if calls else None,
    })
rows.sort(key=lambda r: -r["cpu_ms_per_s"])
json.dump({"seconds": wall, "gpus": gpus, "tree_cpu_ms_per_s": (c1 - c0) * 1e3 / wall,
           "calls": rows}, open(out, "w"), indent=1)
PY
kill "$cost_pid" 2>/dev/null
wait "$cost_pid" 2>/dev/null
echo "  read NVML call costs ($(($(date +%s) - started)) s in)"

python3 - "$results" "$OUT/costs.json" "$gpus" "$model" >"$OUT/summary.md" <<'PY'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
costs = json.load(open(sys.argv[2]))
gpus, model = sys.argv[3], sys.argv[4]
f = lambda v, d=2: "—" if v is None else f"{v:.{d}f}"
print(f"#### Where the idle CPU goes ({gpus} × {model}): threads above 0.05 ms/s\n")
for r in rows:
    if "error" in r:
        continue
    top = [(k, v) for k, v in r["idle_cpu_ms_per_s_by_thread"].items() if v >= 0.05]
    print(f"- {r['name']}: " + ", ".join(f"`{k}` {v:.2f}" for k, v in top))
print("\n#### PSS by process (MiB; largest mappings)\n")
for r in rows:
    for p in r.get("per_process", []):
        maps = ", ".join(f"{n} {v}" for n, v in p["top_mappings_mib"][:4])
        print(f"- {r['name']}: `{p['cmd'][:48]}` PSS {p['pss_mib']:.1f} "
              f"(anon {p['pss_anon_mib']:.1f}, file {p['pss_file_mib']:.1f}), RSS {p['rss_mib']:.1f}: {maps}")
if "calls" in costs:
    print(f"\n#### NVML calls, tessera defaults at full detail, over {costs['seconds']:.0f} s "
          f"(tessera and its worker: {costs['tree_cpu_ms_per_s']:.2f} CPU ms/s)\n")
    print("| call | calls/s | CPU ms/s | wall ms/s | CPU µs/call | wall µs/call |\n|---|---|---|---|---|---|")
    for c in costs["calls"][:15]:
        print(f"| {c['call']} | {c['calls_per_s']:.2f} | {c['cpu_ms_per_s']:.3f} | {c['wall_ms_per_s']:.3f} | "
              f"{f(c['cpu_us_per_call'], 1)} | {f(c['wall_us_per_call'], 1)} |")
    cpu = sum(c["cpu_ms_per_s"] for c in costs["calls"])
    print(f"| **all calls** | | **{cpu:.3f}** | | | |")
print(f"\n#### Footprint, {gpus} × {model}, two CUDA processes, 1 s sampling\n")
print("| exporter | processes | PSS MiB | RSS MiB (sum) | idle CPU % of a core | CPU ms per scrape | scrape p50 / p99 ms | series | worker restarts | GPM gate busy |")
print("|---|---|---|---|---|---|---|---|---|---|")
for r in rows:
    if "error" in r:
        print(f"| {r['name']} | {r['error']} |  |  |  |  |  |  |  |  |")
        continue
    print(f"| {r['name']} | {r['processes']} | {f(r['pss_mib'], 1)} | {f(r['rss_mib'], 1)} | "
          f"{f(r['idle_cpu_pct'])} | {f(r['cpu_ms_per_scrape'], 3)} | {f(r['p50_ms'])} / {f(r['p99_ms'])} | "
          f"{r['series']} | {f(r['worker_restarts'], 0)} | {f(r['gpm_gate_busy'], 0)} |")
PY
cat "$OUT/summary.md"
echo
echo "(done in $(($(date +%s) - started)) s; files in $OUT)"

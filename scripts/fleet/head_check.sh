#!/usr/bin/env bash
# The head that --head-minutes writes (scripts/fleet/head.py) against the same history as
# blocks: two Prometheus processes on one replayed history, one with all of it in blocks, one
# with its last M minutes in the head; neither scrapes. At instants inside the head's part,
# every expression of the rules (those that read no recorded series: the blocks' side records
# none) and [1h] counts of every raw series must give the same series and values. Also checks
# that the head holds the head's part (its minimum time, the TSDB status).
#
#   scripts/fleet/head_check.sh [--nodes 3] [--history-hours 2] [--head-minutes 70]
#
# Needs prometheus/promtool (2.42+), python3 with PyYAML, curl, FLEET_HISTORY_BIN. Last line:
# "head_check: N passed, M failed".
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
FLEET_HISTORY_BIN=${FLEET_HISTORY_BIN:-target/release/fleet-history}
PROMTOOL=${PROMTOOL:-promtool}
nodes=3 history=2 head=70 scrape=15
while (($#)); do
  case $1 in
    --nodes) nodes=$2; shift ;;
    --history-hours) history=$2; shift ;;
    --head-minutes) head=$2; shift ;;
    *) echo "head_check.sh: unknown argument $1" >&2; exit 2 ;;
  esac
  shift
done
. scripts/lib/harness.sh
pids=()
tmp=$(mktemp -d "${TMPDIR:-/tmp}/tessera-headcheck.XXXXXX")
cleanup() {
  stop_pids
  rm -rf "$tmp"
}
trap cleanup EXIT
mkdir -p "$tmp/captures" "$tmp/blocks" "$tmp/head"
tar xJf tests/data/fleet-captures-16.tar.xz -C "$tmp/captures"
hist_to=$(($(date +%s) / scrape * scrape))
hist_from=$(((hist_to - history * 3600) / 1800 * 1800))
head_from=$((hist_to - head * 60))
# blocks DIR FROM TO: [FROM, TO) as blocks of at most 30 minutes (2 h divides by them).
blocks() {
  local s
  for ((s = $2; s < $3; s += 1800)); do
    "$FLEET_HISTORY_BIN" openmetrics --captures "$tmp/captures" --nodes "$nodes" --origin "$hist_from" \
      --from "$s" --to "$((s + 1800 < $3 ? s + 1800 : $3))" >"$tmp/chunk.om" 2>/dev/null
    "$PROMTOOL" tsdb create-blocks-from openmetrics "$tmp/chunk.om" "$1" >/dev/null
  done
}
blocks "$tmp/blocks" "$hist_from" "$hist_to"
blocks "$tmp/head" "$hist_from" "$head_from"
printf 'global:\n  scrape_interval: %ss\n' "$scrape" >"$tmp/prometheus.yml"
declare -A port
for side in blocks head; do
  port[$side]=$(free_port)
  prometheus --config.file="$tmp/prometheus.yml" --storage.tsdb.path="$tmp/$side" --storage.tsdb.retention.time=30d \
    --web.listen-address="127.0.0.1:${port[$side]}" --web.enable-remote-write-receiver --log.level=warn \
    >"$tmp/prometheus-$side.log" 2>&1 &
  pids+=("$!")
  wait_http "http://127.0.0.1:${port[$side]}/-/ready" 60 "$!"
done
python3 scripts/fleet/head.py --prom "http://127.0.0.1:${port[head]}" --fleet-history "$FLEET_HISTORY_BIN" \
  --captures "$tmp/captures" --nodes "$nodes" --origin "$hist_from" --interval "$scrape" --history-from "$hist_from" \
  --from "$head_from" --to "$hist_to" --promtool "$PROMTOOL" --blocks "$tmp/head" --work "$tmp/work" >"$tmp/head.log" 2>&1 ||
  { tail -n 5 "$tmp/head.log"; echo "head_check: 0 passed, 1 failed"; exit 1; }
grep '^head:' "$tmp/head.log"
python3 - "http://127.0.0.1:${port[blocks]}" "http://127.0.0.1:${port[head]}" "$head_from" "$hist_to" alerts/*.yaml <<'EOF'
import json, math, re, sys, urllib.parse, urllib.request
import yaml
pb, ph, head_from, hist_to, files = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), sys.argv[5:]
def get(p, path, **kw):
    with urllib.request.urlopen(f"{p}{path}?{urllib.parse.urlencode(kw)}", timeout=300) as r:
        return json.load(r)["data"]
def vec(p, expr, t):
    return {tuple(sorted(s["metric"].items())): float(s["value"][1]) for s in get(p, "/api/v1/query", query=expr, time=t)["result"]}
passed = failed = 0
def check(ok, msg):
    global passed, failed
    print(("ok    " if ok else "FAIL  ") + msg, flush=True)
    passed, failed = passed + ok, failed + (not ok)
st = get(ph, "/api/v1/status/tsdb")["headStats"]
check(st["minTime"] <= head_from * 1000 < st["minTime"] + 60_000 and st["maxTime"] >= (hist_to - 15) * 1000,
      f"the head holds [{head_from}, {hist_to}): head minTime {st['minTime']}, maxTime {st['maxTime']}, {st['numSeries']} series")
recorded = re.compile(r"[A-Za-z_]+:[A-Za-z0-9_:]+")
exprs = [("raw [1h] samples", 'count_over_time(gpu_container_memory_used_bytes[1h])'),
         ("raw [1h] maximum", 'max_over_time(gpu_container_memory_used_bytes[1h])'),
         ("raw [1h] increase", 'increase(gpu_container_energy_joules_total[1h])'),
         ("raw [10m] rate", 'rate(gpu_container_energy_joules_total[10m])')]
for f in files:
    for g in yaml.safe_load(open(f))["groups"]:
        for r in g["rules"]:
            if not recorded.search(r["expr"]):
                exprs.append((r.get("record") or r.get("alert"), r["expr"]))
close = lambda x, y: (math.isnan(x) and math.isnan(y)) or x == y or abs(x - y) <= 1e-9 * max(abs(x), abs(y))
# Instants inside the head's part: an hour's windows there reach into the blocks on both sides.
instants = [hist_to - 30, hist_to - 1800 - 7, head_from + 601]
nonempty = 0
for name, expr in exprs:
    bad = []
    for t in instants:
        try:
            a, b = vec(pb, expr, t), vec(ph, expr, t)
        except urllib.error.HTTPError as e:
            bad.append(f"at {t}: {e.code} {e.read()[:200]!r}")
            continue
        nonempty += bool(a)
        if set(a) != set(b):
            bad.append(f"at {t}: {len(set(a) - set(b))} series only in blocks, {len(set(b) - set(a))} only in the head")
        elif any(not close(a[k], b[k]) for k in a):
            k = next(k for k in a if not close(a[k], b[k]))
            bad.append(f"at {t}: {a[k]} against {b[k]} for {dict(k)}")
    check(not bad, f"{name}: same series and values at {len(instants)} instants" + (f": {bad[0]}" if bad else ""))
check(nonempty > len(exprs), f"{nonempty} of {len(exprs) * len(instants)} evaluations returned series")
print(f"head_check: {passed} passed, {failed} failed")
sys.exit(1 if failed else 0)
EOF

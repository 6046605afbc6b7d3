#!/usr/bin/env bash
# A fleet of simulated tessera nodes against a real Prometheus and against VictoriaMetrics:
#
#   scripts/fleet.sh --small                 # 3 nodes (27 GPUs), 60 s live, checks that can fail
#   scripts/fleet.sh --nodes 112 --minutes 10 --out docs/data/fleet-1000-live.json
#
# 1. N processes of `tessera --demo --demo.fleet-node=i` (i = 0..N-1): 9 GPUs each, every node
#    its own name, cluster (50 nodes a cluster) and mix of sharing modes and load (src/demo/fleet.rs);
# 2. Prometheus scrapes them every --scrape seconds (target label `cluster`, as a Prometheus per
#    cluster would carry it in external_labels) and remote-writes every scraped sample (not its
#    rules' output) to vmagent, which writes it to VictoriaMetrics: both engines hold the same
#    samples. (vmagent scraping on its own would scrape at other instants and see other values,
#    and a comparison of the engines would compare those; vmagent remote-writing into
#    Prometheus's receiver fell minutes behind at 1,000 GPUs on this machine.);
# 3. Prometheus evaluates alerts/*.yaml, vmalert evaluates the same files against
#    VictoriaMetrics (group intervals dropped, `for:` 0s: tests/prometheus/rules_for_test.py;
#    every group runs every --eval seconds);
# 4. after --minutes, scripts/fleet/measure.py measures: series total / per GPU / per container,
#    Prometheus head series and RSS, every rule group's evaluation time (max over the run), every
#    dashboard query over 1 h and 24 h (as far back as there is data: see docs/scale.md),
#    `tessera advise` over 7 d, and vmalert against Prometheus rule by rule; it prints a table
#    and writes --out (JSON).
#
# --small adds the checks (exit 1 on any failure): every rule group of both engines evaluates
# without error, every recording rule's output agrees between them, every dashboard query
# parses and answers. Needs prometheus/promtool (2.42+), victoria-metrics, vmagent, vmalert
# (Debian: victoria-metrics), python3 with PyYAML, curl; and a release build.
# Listens on 127.0.0.1 only; stops what it starts. Last line: "N passed, M failed".
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."
ROOT=$PWD
TESSERA_BIN=${TESSERA_BIN:-target/release/tessera}
nodes=3 seconds=60 scrape=5 eval=5 small=0 out="" keep=""
while (($#)); do
  case $1 in
    --small) small=1 ;;
    --nodes) nodes=$2; shift ;;
    --minutes) seconds=$(($2 * 60)); shift ;;
    --seconds) seconds=$2; shift ;;
    --scrape) scrape=$2; shift ;;
    --eval) eval=$2; shift ;;
    --out) out=$2; shift ;;
    --keep) keep=$2; shift ;;
    *) echo "fleet.sh: unknown argument $1" >&2; exit 2 ;;
  esac
  shift
done
LIMIT=${TESSERA_TEST_TIMEOUT:-$((seconds + nodes * 3 + 600))}

passed=0
failed=0
pids=()
tmp=$(mktemp -d "${TMPDIR:-/tmp}/tessera-fleet.XXXXXX")
cleanup() {
  local p
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
  if [[ -n $keep ]]; then
    mkdir -p "$keep" && cp "$tmp"/*.log "$keep"/ 2>/dev/null || true
  fi
  rm -rf "$tmp"
}
trap cleanup EXIT
trap 'echo "interrupted"; echo "$passed passed, $((failed + 1)) failed"; exit 130' INT TERM
# shellcheck source=lib/harness.sh
. scripts/lib/harness.sh
start_watchdog fleet.sh "$LIMIT"
pids+=("$watchdog_pid")
finish() { echo; echo "$passed passed, $failed failed"; ((failed == 0)); exit; }

section "prerequisites"
need_tools prometheus promtool victoria-metrics vmagent vmalert python3 curl || finish

# start NAME URL CMD...: runs CMD in the background (log in $tmp/NAME.log) until URL answers.
start() {
  local name=$1 url=$2
  shift 2
  "$@" >"$tmp/$name.log" 2>&1 &
  pids+=("$!")
  if ! wait_http "$url" 60 "$!"; then
    fail "$name did not start"
    tail -n 5 "$tmp/$name.log" | cut -c1-300 | sed 's/^/      /'
    finish
  fi
}

section "$nodes fleet nodes ($((nodes * 9)) GPUs)"
t0=$SECONDS
targets=()
for ((i = 0; i < nodes; i++)); do
  port=$(free_port)
  # Demo nodes sample once a scrape: the fleet measures the monitoring stack, and 112 nodes
  # sampling every second would take the cores Prometheus is being measured on.
  TESSERA_LOG_LEVEL=warn "$TESSERA_BIN" --demo --demo.fleet-node="$i" \
    --web.listen-address="127.0.0.1:$port" --sample.interval="${scrape}s" --nvml.process-interval="${scrape}s" \
    >"$tmp/node-$i.log" 2>&1 &
  pids+=("$!")
  targets+=("$i:$port")
done
for t in "${targets[@]}"; do
  if ! wait_http "http://127.0.0.1:${t#*:}/readyz" 60; then
    fail "node ${t%%:*} not ready"
    tail -n 5 "$tmp/node-${t%%:*}.log" | sed 's/^/      /'
    finish
  fi
done
pass "$nodes nodes ready ($((SECONDS - t0)) s)"

# Rules as tests/prometheus/rules_for_test.py writes them: every group at the engine's interval.
python3 tests/prometheus/rules_for_test.py "$tmp/rules" alerts/*.yaml
prom_port=$(free_port)
vm_port=$(free_port)
vmagent_port=$(free_port)
vmalert_port=$(free_port)
sink_port=$(free_port)
python3 - "$scrape" "$eval" "http://127.0.0.1:$vmagent_port/api/v1/write" "$tmp/rules" "${targets[@]}" \
  >"$tmp/prometheus.yml" <<'EOF'
import glob
import sys
from collections import defaultdict
scrape, ev, write, rules, targets = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4], sys.argv[5:]
clusters = defaultdict(list)
for t in targets:
    i, port = t.split(":")
    # The cluster a node belongs to, as src/demo/fleet.rs derives it (50 nodes a cluster).
    clusters[f"fleet-{int(i) // 50}"].append(f"127.0.0.1:{port}")
print(f"global:\n  scrape_interval: {scrape}s\n  scrape_timeout: {min(int(scrape), 10)}s\n  evaluation_interval: {ev}s")
print("rule_files:")
for f in sorted(glob.glob(rules + "/*.yaml")):
    print(f"  - {f}")
# Scraped samples only: vmalert writes its own rules' output into VictoriaMetrics, and
# every recording rule is named level:metric:operations (tests/prometheus/check_static.py).
print(f"remote_write:\n  - url: {write}\n    write_relabel_configs:")
print("      - {source_labels: [__name__], regex: '.+:.+|ALERTS|ALERTS_FOR_STATE', action: drop}")
print("scrape_configs:\n  - job_name: tessera\n    static_configs:")
for c, ts in sorted(clusters.items()):
    print(f"      - labels: {{cluster: {c}}}\n        targets: [{', '.join(ts)}]")
EOF

section "Prometheus, VictoriaMetrics, vmagent, vmalert"
start victoria-metrics "http://127.0.0.1:$vm_port/health" \
  victoria-metrics -storageDataPath="$tmp/vm" -httpListenAddr="127.0.0.1:$vm_port" \
  -search.latencyOffset=0s -search.disableCache -loggerLevel=WARN
start vmagent "http://127.0.0.1:$vmagent_port/health" \
  vmagent -httpListenAddr="127.0.0.1:$vmagent_port" \
  -remoteWrite.url="http://127.0.0.1:$vm_port/api/v1/write" \
  -remoteWrite.tmpDataPath="$tmp/vmagent" -loggerLevel=WARN
start prometheus "http://127.0.0.1:$prom_port/-/ready" \
  prometheus --config.file="$tmp/prometheus.yml" --storage.tsdb.path="$tmp/prom" \
  --web.listen-address="127.0.0.1:$prom_port" --log.level=warn
# vmalert must send its alerts somewhere: a sink that accepts them.
start sink "http://127.0.0.1:$sink_port/" python3 scripts/fleet/sink.py "$sink_port"
start vmalert "http://127.0.0.1:$vmalert_port/health" \
  vmalert -rule="$tmp/rules/*.yaml" -datasource.url="http://127.0.0.1:$vm_port" \
  -remoteWrite.url="http://127.0.0.1:$vm_port" -notifier.url="http://127.0.0.1:$sink_port" \
  -evaluationInterval="${eval}s" -httpListenAddr="127.0.0.1:$vmalert_port" -loggerLevel=WARN
pass "all started"

section "measure (${seconds} s of live data)"
args=(--prom "http://127.0.0.1:$prom_port" --vm "http://127.0.0.1:$vm_port"
  --vmalert "http://127.0.0.1:$vmalert_port" --vmagent "http://127.0.0.1:$vmagent_port"
  --rules "$tmp"/rules/*.yaml --dashboards dashboards/*.json --tessera "$TESSERA_BIN"
  --seconds "$seconds" --eval "$eval" --scrape "$scrape" --nodes "$nodes")
[[ -n $out ]] && args+=(--out "$out")
((small)) && args+=(--check)
FLEET_COMMIT=$(git rev-parse --short HEAD 2>/dev/null || true)$(git diff --quiet HEAD 2>/dev/null || echo +dirty)
export FLEET_COMMIT
log=$tmp/measure.log
set +e
python3 scripts/fleet/measure.py "${args[@]}" 2>&1 | tee "$log"
rc=${PIPESTATUS[0]}
set -e
read -r p f < <(sed -nE 's/^measure: ([0-9]+) passed, ([0-9]+) failed$/\1 \2/p' "$log" | tail -n 1)
# measure.py prints its "measure: N passed, M failed" line only with --check (--small): a full
# run without it has no checks to count, and only its exit status says whether it finished.
passed=$((passed + ${p:-0}))
failed=$((failed + ${f:-0}))
((rc == 0)) || [[ -n $f ]] || fail "measure.py exited $rc"
finish

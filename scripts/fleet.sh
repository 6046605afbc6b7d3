#!/usr/bin/env bash
# A fleet of simulated tessera nodes against a real Prometheus and against VictoriaMetrics:
#
#   scripts/fleet.sh --small                 # 3 nodes (27 GPUs), 60 s live, checks that can fail
#   scripts/fleet.sh --nodes 112 --minutes 10 --out lab/data/fleet-1000-live.json
#   scripts/fleet.sh --replay tests/data/fleet-captures-16.tar.xz --history-hours 24 --nodes 112 \
#     --minutes 2 --scrape 15 --eval 15 --out lab/data/fleet-1000-24h.json
#
# --replay CAPTURES (scripts/fleet/capture.py's output, a directory or .tar.xz): instead of N
# demo processes, one `fleet-history serve` (crates/fleet-history) answers for N nodes cloned
# from the captures; first it writes --history-hours of their samples at the scrape interval
# ending now into both engines (OpenMetrics -> promtool blocks; JSON lines -> VictoriaMetrics's
# import), then a week (--summary-days) of the advisor's 5-minute summaries
# (scripts/fleet/summaries.py), so rules, dashboards and `advise` read full windows. The
# live scrapes that follow continue the same series (same function of time).
#
# --head-minutes M (with --replay): the history's last M minutes go into Prometheus's head
# instead of blocks (scripts/fleet/head.py: remote-written, window by window in time order,
# into a Prometheus started with its receiver and neither scrapes nor rules, which it loads
# after), so the rules' [10m] and [1h] windows read the head, as in a Prometheus that has run
# for an hour, not backfilled blocks, which cost 3-4 times as much a series. The rollups are
# recorded over both parts; VictoriaMetrics imports the whole history as before. The advisor's
# week of summaries ends where the head starts (a block past it would truncate the head).
#
# 1. N processes of `tessera --demo --demo.fleet-node=i` (i = 0..N-1): 9 GPUs each, every node
#    its own name, cluster (50 nodes a cluster) and mix of sharing modes and load (crates/demo/src/fleet.rs);
# 2. Prometheus scrapes them every --scrape seconds (target label `cluster`, as a Prometheus per
#    cluster would carry it in external_labels) and remote-writes every scraped sample (not its
#    rules' output) to vmagent, which writes it to VictoriaMetrics: both engines hold the same
#    samples. (vmagent scraping on its own would scrape at other instants and see other values,
#    and a comparison of the engines would compare those; vmagent remote-writing into
#    Prometheus's receiver fell minutes behind at 1,000 GPUs on this machine.);
# 3. Prometheus evaluates alerts/*.yaml (or $FLEET_RULES/*.yaml), vmalert evaluates the same files against
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
nodes=3 seconds=60 scrape=5 eval=5 small=0 out="" keep="" replay="" history=0 summary_days=7 head=0
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
    --replay) replay=$2; shift ;;
    --history-hours) history=$2; shift ;;
    --summary-days) summary_days=$2; shift ;;
    --head-minutes) head=$2; shift ;;
    *) echo "fleet.sh: unknown argument $1" >&2; exit 2 ;;
  esac
  shift
done
LIMIT=${TESSERA_TEST_TIMEOUT:-$((seconds + nodes * 3 + 600 + history * nodes * 2))}
FLEET_HISTORY_BIN=${FLEET_HISTORY_BIN:-target/release/fleet-history}
PROMTOOL=${PROMTOOL:-promtool}
# The rule files measured: the shipped ones, or another set of the same groups (FLEET_RULES=DIR,
# e.g. lab/data/rules-before-layering to measure the rules as they were before the rollups).
RULES=${FLEET_RULES:-alerts}

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
if [[ -n $replay ]] && [[ ! -x $FLEET_HISTORY_BIN ]]; then
  fail "missing $FLEET_HISTORY_BIN (cargo build --release -p fleet-history)"
  finish
fi
# The captures were taken every 15 s (capture.py's default); replaying them at another interval
# would play the demo's loop faster or slower than it ran.
if [[ -n $replay ]] && ((scrape != 15)); then
  fail "--replay needs --scrape 15 (the captures' interval)"
  finish
fi
if ((head > 0)) && { [[ -z $replay ]] || ((head * 60 >= history * 3600)); }; then
  fail "--head-minutes needs --replay and less than --history-hours"
  finish
fi

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

t0=$SECONDS
targets=()
if [[ -n $replay ]]; then
  section "$nodes replayed fleet nodes ($((nodes * 9)) GPUs), $history h of history"
  captures=$replay
  if [[ -f $replay ]]; then
    captures=$tmp/captures
    mkdir -p "$captures" && tar xJf "$replay" -C "$captures"
  fi
  # History chunks of at most ~8 M samples (a node serves ~480 series every scrape), dividing
  # 2 h so that no block promtool writes straddles Prometheus's 2-h block boundaries.
  per_s=$((nodes * 480 / scrape + 1))
  chunk=300
  for c in 7200 3600 1800 900 600; do
    if ((c * per_s <= 8000000)); then chunk=$c; break; fi
  done
  now=$(date +%s)
  hist_to=$((now / scrape * scrape))
  hist_from=$(((hist_to - history * 3600) / chunk * chunk))
  origin=$hist_from
  # Where Prometheus's blocks end and its head starts (the end: no head).
  head_from=$((head > 0 ? hist_to - head * 60 : 1 << 62))
  replay_port=$(free_port)
  "$FLEET_HISTORY_BIN" serve --captures "$captures" --nodes "$nodes" --origin "$origin" \
    --interval "$scrape" --listen "127.0.0.1:$replay_port" >"$tmp/replay.log" 2>&1 &
  pids+=("$!")
  if ! wait_http "http://127.0.0.1:$replay_port/metrics?node=0" 30 "$!"; then
    fail "fleet-history serve did not start"
    finish
  fi
  for ((i = 0; i < nodes; i++)); do targets+=("$i:replay:$replay_port"); done
  pass "replay of $nodes nodes serving ($((SECONDS - t0)) s)"
else
section "$nodes fleet nodes ($((nodes * 9)) GPUs)"
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
fi

# Rules as tests/prometheus/rules_for_test.py writes them: every group at the engine's interval.
python3 tests/prometheus/rules_for_test.py "$tmp/rules" "$RULES"/*.yaml
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
replay = None
for t in targets:
    i, port = t.split(":", 1)
    if port.startswith("replay:"):
        # One fleet-history process answers for every node: the target names the node, the
        # relabelling below turns it into ?node=N on that process's address.
        replay = port.split(":")[1]
        clusters[f"fleet-{int(i) // 50}"].append(f"fleet-{int(i) // 50}-gpu-{int(i):05d}")
        continue
    # The cluster a node belongs to, as crates/demo/src/fleet.rs derives it (50 nodes a cluster).
    clusters[f"fleet-{int(i) // 50}"].append(f"127.0.0.1:{port}")
print(f"global:\n  scrape_interval: {scrape}s\n  scrape_timeout: {min(int(scrape), 10)}s\n  evaluation_interval: {ev}s")
# Above this line: all that a Prometheus being written its head is started with (--head-minutes).
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
if replay:
    print("    relabel_configs:")
    print("      - {source_labels: [__address__], regex: 'fleet-[0-9]+-gpu-0*([0-9]+)', target_label: __param_node}")
    print("      - {source_labels: [__address__], target_label: instance}")
    print(f"      - {{target_label: __address__, replacement: '127.0.0.1:{replay}'}}")
EOF

section "Prometheus, VictoriaMetrics, vmagent, vmalert"
start victoria-metrics "http://127.0.0.1:$vm_port/health" \
  victoria-metrics -storageDataPath="$tmp/vm" -httpListenAddr="127.0.0.1:$vm_port" \
  -search.latencyOffset=0s -search.disableCache -loggerLevel=WARN
if [[ -n $replay ]] && ((history > 0)); then
  section "backfill: $history h of $nodes nodes (origin $origin, chunks of $chunk s)"
  t0=$SECONDS
  mkdir -p "$tmp/prom"
  shm=${FLEET_SHM:-/dev/shm}
  [[ -d $shm && -w $shm ]] || shm=$tmp
  jobs=$(nproc)
  # backfill FROM TO: [FROM, TO) into both engines, Prometheus's blocks only up to the head's
  # start; sets prom_ok and vm_ok.
  backfill() {
    local from=$1 to=$2 k lo hi p vm_pids=()
    local prom_to=$((to < head_from ? to : head_from))
    # VictoriaMetrics: one import stream per 1/8 of the nodes.
    for ((k = 0; k < 8; k++)); do
      lo=$((nodes * k / 8)) hi=$((nodes * (k + 1) / 8))
      ((hi > lo)) || continue
      "$FLEET_HISTORY_BIN" vm --captures "$captures" --nodes "$nodes" --origin "$origin" --interval "$scrape" \
        --from "$from" --to "$to" --node-range "$lo:$hi" 2>>"$tmp/backfill.log" |
        curl -fsS --data-binary @- "http://127.0.0.1:$vm_port/api/v1/import" >>"$tmp/backfill.log" 2>&1 &
      vm_pids+=("$!")
    done
    # Prometheus: each chunk written to $shm, turned into a block in Prometheus's data directory
    # by promtool (single-threaded, hence one per core), and removed.
    prom_ok=1
    if ((prom_to > from)); then
    for ((s = from; s < prom_to; s += chunk)); do echo "$s $((s + chunk < prom_to ? s + chunk : prom_to))"; done |
      xargs -P "$jobs" -L 1 bash -c '
        # $0..$7: shm, fleet-history, captures, nodes, origin, interval, promtool, blocks; $8 $9: from, to.
        f=$0/chunk-$8.om
        "$1" openmetrics --captures "$2" --nodes "$3" --origin "$4" --interval "$5" --from "$8" --to "$9" >"$f" 2>/dev/null &&
          "$6" tsdb create-blocks-from openmetrics "$f" "$7" >/dev/null; rc=$?; rm -f "$f"; exit $rc' \
        "$shm" "$FLEET_HISTORY_BIN" "$captures" "$nodes" "$origin" "$scrape" "$PROMTOOL" "$tmp/prom" 2>>"$tmp/backfill.log" &&
      prom_ok=1 || prom_ok=0
    fi
    vm_ok=1
    for p in "${vm_pids[@]}"; do wait "$p" || vm_ok=0; done
  }
  backfill "$hist_from" "$hist_to"
  # The backfill took minutes at 1,000 GPUs: write those minutes too, so that the live scrapes
  # start where the history ends (a gap would leave [5m] windows half empty at the start).
  if ((prom_ok && vm_ok)); then
    top=$(($(date +%s) / scrape * scrape))
    if ((top > hist_to)); then
      backfill "$hist_to" "$top"
      hist_to=$top
    fi
  fi
  curl -fsS "http://127.0.0.1:$vm_port/internal/force_flush" >/dev/null 2>&1 || true
  if ((prom_ok && vm_ok)); then
    pass "backfilled $(ls -d "$tmp"/prom/01* | wc -l) blocks and VictoriaMetrics in $((SECONDS - t0)) s"
  else
    fail "backfill (prometheus $prom_ok, victoriametrics $vm_ok)"
    tail -n 5 "$tmp/backfill.log" | cut -c1-300 | sed 's/^/      /'
    finish
  fi
fi
start vmagent "http://127.0.0.1:$vmagent_port/health" \
  vmagent -httpListenAddr="127.0.0.1:$vmagent_port" \
  -remoteWrite.url="http://127.0.0.1:$vm_port/api/v1/write" \
  -remoteWrite.tmpDataPath="$tmp/vmagent" -loggerLevel=WARN
head_args=()
if ((head > 0)); then
  # Neither scrapes nor rules while its head is written: a scrape would put a sample newer
  # than the history in every series, and the head then refuses the history's samples.
  cp "$tmp/prometheus.yml" "$tmp/prometheus-full.yml"
  sed -n '/^rule_files:/q;p' "$tmp/prometheus-full.yml" >"$tmp/prometheus.yml"
  head_args=(--web.enable-remote-write-receiver)
fi
start prometheus "http://127.0.0.1:$prom_port/-/ready" \
  prometheus --config.file="$tmp/prometheus.yml" --storage.tsdb.path="$tmp/prom" --storage.tsdb.retention.time=30d \
  --web.listen-address="127.0.0.1:$prom_port" --log.level=warn "${head_args[@]}"
prom_pid=${pids[-1]}
if ((head > 0)); then
  section "head: the last $head minutes into Prometheus's head"
  t0=$SECONDS
  if end=$(python3 scripts/fleet/head.py --prom "http://127.0.0.1:$prom_port" --fleet-history "$FLEET_HISTORY_BIN" \
    --captures "$captures" --nodes "$nodes" --origin "$origin" --interval "$scrape" --history-from "$hist_from" \
    --from "$head_from" --to "$hist_to" --promtool "$PROMTOOL" --blocks "$tmp/prom" --work "$tmp/head" \
    --catch-up "$RULES"/*.yaml 2>"$tmp/head.log" | tee -a "$tmp/head.log" | tail -n 1); then
    # VictoriaMetrics holds what Prometheus holds: the minutes the head's catching up added.
    if ((end > hist_to)); then
      head_from_was=$head_from head_from=0
      backfill "$hist_to" "$end"
      head_from=$head_from_was
      hist_to=$end
    fi
    cp "$tmp/prometheus-full.yml" "$tmp/prometheus.yml"
    kill -HUP "$prom_pid"
    python3 scripts/fleet/head.py wait-config "http://127.0.0.1:$prom_port"
    pass "head from $head_from to $hist_to written and the scrapes and rules loaded ($((SECONDS - t0)) s): $(grep '^head:' "$tmp/head.log")"
  else
    fail "writing the head"
    tail -n 5 "$tmp/head.log" | cut -c1-300 | sed 's/^/      /'
    finish
  fi
fi
# vmalert must send its alerts somewhere: a sink that accepts them.
start sink "http://127.0.0.1:$sink_port/" python3 scripts/fleet/sink.py "$sink_port"
start vmalert "http://127.0.0.1:$vmalert_port/health" \
  vmalert -rule="$tmp/rules/*.yaml" -datasource.url="http://127.0.0.1:$vm_port" \
  -remoteWrite.url="http://127.0.0.1:$vm_port" -notifier.url="http://127.0.0.1:$sink_port" \
  -evaluationInterval="${eval}s" -httpListenAddr="127.0.0.1:$vmalert_port" -loggerLevel=WARN
pass "all started"
# Measured while Prometheus still compacted the backfilled blocks, 4,032 GPUs' rule groups took
# up to 4.6 s and a 1,008-GPU run's load average was 10.6: wait for the compactor first.
settle() {
  if python3 scripts/fleet/settle.py --prom "http://127.0.0.1:$prom_port" --min "${FLEET_SETTLE_MIN:-$((small ? 0 : 90))}" --max "${FLEET_SETTLE_MAX:-$((small ? 60 : 240))}" >"$tmp/settle.log" 2>&1; then
    pass "Prometheus settled after the $1: $(tail -n 1 "$tmp/settle.log")"
  elif ((small)); then
    # The test's few nodes carry no figure; a busy 2-core machine is not a failure of tessera's.
    echo "note  Prometheus did not settle after the $1: $(tail -n 1 "$tmp/settle.log")"
  else
    fail "Prometheus did not settle after the $1 (the figures below include its compactor): $(tail -n 1 "$tmp/settle.log")"
  fi
}
# The layered rules (a rollup's peaks, a helper recorded earlier in the group) against the raw
# expressions they stand for, over the backfilled history: the rollups are recorded over it
# first, so the rules measured below read hours of them as they would in steady state. The test
# runs it beside the live window (it waits up to a minute for Prometheus to load the rollups);
# a measured run runs it before, so its range queries do not load the figures.
layered() {
  python3 scripts/fleet/layered.py --prom "http://127.0.0.1:$prom_port" --promtool "$PROMTOOL" \
    --blocks "$tmp/prom" --work "$tmp/layered" --direct tests/prometheus/direct-rules.yaml \
    --from "$hist_from" --to "$hist_to" --step "${FLEET_LAYERED_STEP:-$((small ? scrape : 300))}" \
    ${out:+--out "${out%.json}-layered.json"} "${layered_args[@]}" --check "$RULES"/*.yaml >"$tmp/layered.log" 2>&1
}
layered_result() {
  if [[ ${1:-1} == 0 ]]; then
    pass "layered rules equal their direct expressions over the history: $(grep -c '^ok ' "$tmp/layered.log") checks"
  else
    fail "layered rules against their direct expressions"
  fi
  grep -E '^(ok|FAIL) ' "$tmp/layered.log" | cut -c1-400 | sed 's/^/      /'
}
layered_pid=""
layered_args=()
# head.py recorded the rollups already, the head's part as the head was written.
((head > 0)) && layered_args=(--recorded)
if [[ -n $replay ]] && ((history > 0)); then
  if ((small)); then
    layered &
    layered_pid=$!
    pids+=("$layered_pid")
  else
    rc=0
    layered || rc=$?
    layered_result "$rc"
  fi
fi
[[ -n $replay ]] && settle backfill
if [[ -n $replay ]] && ((summary_days > 0)); then
  t0=$SECONDS
  if python3 scripts/fleet/summaries.py --prom "http://127.0.0.1:$prom_port" --vm "http://127.0.0.1:$vm_port" \
    --rules "$tmp/rules/tessera-advisor.yaml" --promtool "$PROMTOOL" --blocks "$tmp/prom" --work "$tmp/summaries" \
    --days "$summary_days" --before "$head_from" >"$tmp/summaries.log" 2>&1; then
    pass "$summary_days days of advisor summaries in both engines ($((SECONDS - t0)) s): $(tail -n 1 "$tmp/summaries.log")"
  else
    fail "advisor summaries: $(tail -n 3 "$tmp/summaries.log")"
  fi
  settle summaries
fi

section "measure (${seconds} s of live data)"
args=(--prom "http://127.0.0.1:$prom_port" --vm "http://127.0.0.1:$vm_port"
  --vmalert "http://127.0.0.1:$vmalert_port" --vmagent "http://127.0.0.1:$vmagent_port"
  --rules "$tmp"/rules/*.yaml --dashboards dashboards/*.json --tessera "$TESSERA_BIN"
  --seconds "$seconds" --eval "$eval" --scrape "$scrape" --nodes "$nodes")
[[ -n $out ]] && args+=(--out "$out")
if [[ -n $replay ]]; then
  # The data reaches back to the history's start; the comparison instant is two rounds before the end.
  args+=(--data-seconds "$((hist_to - hist_from + seconds - 2 * eval - scrape))" --history-seconds "$((hist_to - hist_from))")
fi
((small)) && args+=(--check)
FLEET_COMMIT=${FLEET_COMMIT:-$(git rev-parse --short HEAD 2>/dev/null || true)$(git diff --quiet HEAD 2>/dev/null || echo +dirty)}
export FLEET_COMMIT
log=$tmp/measure.log
set +e
python3 scripts/fleet/measure.py "${args[@]}" 2>&1 | tee "$log"
rc=${PIPESTATUS[0]}
set -e
# `read` fails at end of input, and without --check there is no such line: under `set -e` that
# ended the script with status 1 right after its table (the 1,008-GPU run of 2026-11-26).
read -r p f < <(sed -nE 's/^measure: ([0-9]+) passed, ([0-9]+) failed$/\1 \2/p' "$log" | tail -n 1) || true
# measure.py prints its "measure: N passed, M failed" line only with --check (--small): a full
# run without it has no checks to count, and only its exit status says whether it finished.
passed=$((passed + ${p:-0}))
failed=$((failed + ${f:-0}))
((rc == 0)) || [[ -n $f ]] || fail "measure.py exited $rc"
if [[ -n $layered_pid ]]; then
  rc=0
  wait "$layered_pid" || rc=$?
  layered_result "$rc"
fi
finish

#!/usr/bin/env bash
# A fleet above one Prometheus: SHARDS Prometheus servers, each scraping its own replayed
# nodes (whole 50-node clusters, as a Prometheus per cluster or per few clusters would), each
# evaluating tessera's rules, each remote-writing everything it holds (scraped samples,
# recorded series, ALERTS) to one VictoriaMetrics, the global layer; then
# scripts/fleet/global_check.py checks that the fleet-wide figures, every dashboard query and
# `tessera advise` work there unchanged, and times them.
#
#   scripts/fleet/shards.sh [--shards 4] [--nodes 3] [--seconds 90] [--out FILE.json]
#       [--history-minutes 75 --head-minutes 70] [--summary-days 7]
#
# --nodes is per shard (9 GPUs a node); shard k's nodes are fleet nodes k*S.. (S: --nodes
# rounded up to whole clusters of 50), named and labelled as fleet-history names them, so the
# live scrapes continue the history's series. --seconds: how long every shard's rule groups
# are timed (scripts/fleet/group_times.py, every round of every group), after which each
# shard must evaluate two more rounds.
#
# --history-minutes H --head-minutes M: the last H minutes of each shard's nodes, the first
# H - M as blocks, the last M in the shard's head (scripts/fleet/head.py, into a Prometheus that
# neither scrapes nor evaluates until it holds them), and the same M minutes (raw and rollups)
# into VictoriaMetrics, as the shards' remote write would have sent them live. 70 minutes of
# head hold every [1h] window: a shard's groups then cost what they cost in a Prometheus that
# has run for an hour. Without it the windows hold the run's minutes and the groups cost less.
# --summary-days D: a week of the advisor's summaries, written by each shard's values into
# VictoriaMetrics (scripts/fleet/summaries.py), where `tessera advise` reads them.
#
# Rules as tests/prometheus/rules_for_test.py writes them (every group every 15 s, `for:` 0s).
# Needs prometheus, promtool, victoria-metrics, python3 with PyYAML, curl, fleet-history and
# tessera (release builds; TESSERA_BIN, FLEET_HISTORY_BIN). FLEET_SETTLE_MAX bounds the wait for
# the shards' compactors (300 s). Last line: "N passed, M failed".
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/../.."
TESSERA_BIN=${TESSERA_BIN:-target/release/tessera}
FLEET_HISTORY_BIN=${FLEET_HISTORY_BIN:-target/release/fleet-history}
PROMTOOL=${PROMTOOL:-promtool}
shards=4 nodes=3 seconds=90 out="" history=0 head=0 summary_days=0
while (($#)); do
  case $1 in
    --shards) shards=$2; shift ;;
    --nodes) nodes=$2; shift ;;
    --seconds) seconds=$2; shift ;;
    --out) out=$2; shift ;;
    --history-minutes) history=$2; shift ;;
    --head-minutes) head=$2; shift ;;
    --summary-days) summary_days=$2; shift ;;
    *) echo "shards.sh: unknown argument $1" >&2; exit 2 ;;
  esac
  shift
done
if ((history > 0)) && ! ((head > 0 && head < history)); then
  echo "shards.sh: --history-minutes needs --head-minutes, less than it" >&2
  exit 2
fi

passed=0
failed=0
pids=()
tmp=$(mktemp -d "${TMPDIR:-/tmp}/tessera-shards.XXXXXX")
# Newest first: a shard stopped after VictoriaMetrics would wait out its remote write's flush.
cleanup() {
  local i
  for ((i = ${#pids[@]} - 1; i >= 0; i--)); do kill "${pids[i]}" 2>/dev/null || true; done
  for ((i = ${#pids[@]} - 1; i >= 0; i--)); do wait "${pids[i]}" 2>/dev/null || true; done
  rm -rf "$tmp"
}
trap cleanup EXIT
trap 'echo "interrupted"; echo "$passed passed, $((failed + 1)) failed"; exit 130' INT TERM
# shellcheck source=../lib/harness.sh
. scripts/lib/harness.sh
start_watchdog shards.sh "$((seconds + shards * nodes * 2 + 300 + (history > 0 ? 600 : 0)))"
pids+=("$watchdog_pid")
finish() { echo; echo "$passed passed, $failed failed"; ((failed == 0)); exit; }

section "prerequisites"
need_tools prometheus promtool victoria-metrics python3 curl || finish
[[ -x $FLEET_HISTORY_BIN ]] || { fail "missing $FLEET_HISTORY_BIN (cargo build --release -p fleet-history)"; finish; }

stride=$(((nodes + 49) / 50 * 50))
total=$((shards * stride))
captures=$tmp/captures
mkdir -p "$captures" && tar xJf tests/data/fleet-captures-16.tar.xz -C "$captures"
now=$(date +%s)
hist_to=$((now / 15 * 15))
if ((history > 0)); then
  origin=$(((hist_to - history * 60) / 300 * 300))
  head_from=$((hist_to - head * 60))
else
  origin=$((hist_to - 3600))
fi
replay_port=$(free_port)
"$FLEET_HISTORY_BIN" serve --captures "$captures" --nodes "$total" --origin "$origin" \
  --interval 15 --listen "127.0.0.1:$replay_port" >"$tmp/replay.log" 2>&1 &
pids+=("$!")
wait_http "http://127.0.0.1:$replay_port/metrics?node=0" 30 "$!" || { fail "fleet-history serve did not start"; finish; }
pass "$((shards * nodes)) replayed nodes ($((shards * nodes * 9)) GPUs) serving"

section "the global layer: VictoriaMetrics"
vm_port=$(free_port)
victoria-metrics -storageDataPath="$tmp/vm" -httpListenAddr="127.0.0.1:$vm_port" \
  -search.latencyOffset=0s -search.disableCache -loggerLevel=WARN >"$tmp/vm.log" 2>&1 &
pids+=("$!")
wait_http "http://127.0.0.1:$vm_port/health" 60 "$!" || { fail "VictoriaMetrics did not start"; finish; }
pass "VictoriaMetrics on 127.0.0.1:$vm_port"

if ((history > 0)); then
  section "history: $history minutes of every shard's nodes, the last $head in its head"
  t0=$SECONDS
  for ((k = 0; k < shards; k++)); do
    FLEET_HISTORY_BIN=$FLEET_HISTORY_BIN PROMTOOL=$PROMTOOL scripts/fleet/blocks.sh "$captures" "$total" "$origin" 15 \
      "$origin" "$head_from" "$tmp/shard-$k" "$((k * stride)):$((k * stride + nodes))" ||
      { fail "shard $k: blocks of [$origin, $head_from)"; finish; }
  done
  pass "blocks of [$origin, $head_from) for $shards shards ($((SECONDS - t0)) s)"
fi

section "$shards shards of $nodes nodes, each a Prometheus with tessera's rules"
python3 tests/prometheus/rules_for_test.py "$tmp/rules" alerts/*.yaml
declare -a shard_url shard_pid
for ((k = 0; k < shards; k++)); do
  port=$(free_port)
  {
    printf 'global:\n  scrape_interval: 15s\n  scrape_timeout: 10s\n  evaluation_interval: 15s\n'
    printf 'rule_files:\n'
    for f in "$tmp"/rules/*.yaml; do printf '  - %s\n' "$f"; done
    # Everything, recorded series and ALERTS included: the global layer's dashboards and the
    # advisor read the shards' recorded series, which no engine above could recompute from
    # another shard's raw samples.
    printf 'remote_write:\n  - url: http://127.0.0.1:%s/api/v1/write\n' "$vm_port"
    printf 'scrape_configs:\n  - job_name: tessera\n    static_configs:\n'
    # One static group per cluster: the history's series carry the same cluster and instance.
    for ((n = 0; n < nodes; n += 50)); do
      first=$((k * stride + n))
      last=$((k * stride + (n + 50 < nodes ? n + 50 : nodes)))
      printf '      - labels: {cluster: fleet-%s}\n        targets: [' "$((first / 50))"
      for ((i = first; i < last; i++)); do
        ((i > first)) && printf ', '
        printf 'fleet-%s-gpu-%05d' "$((i / 50))" "$i"
      done
      printf ']\n'
    done
    printf '    relabel_configs:\n'
    printf "      - {source_labels: [__address__], regex: 'fleet-[0-9]+-gpu-0*([0-9]+)', target_label: __param_node}\n"
    printf '      - {source_labels: [__address__], target_label: instance}\n'
    printf "      - {target_label: __address__, replacement: '127.0.0.1:%s'}\n" "$replay_port"
  } >"$tmp/shard-$k-full.yml"
  head_args=()
  if ((history > 0)); then
    # Neither scrapes, rules nor remote write while the head is written (scripts/fleet.sh says
    # why); the full configuration is loaded after it.
    sed -n '/^rule_files:/q;p' "$tmp/shard-$k-full.yml" >"$tmp/shard-$k.yml"
    head_args=(--web.enable-remote-write-receiver)
  else
    cp "$tmp/shard-$k-full.yml" "$tmp/shard-$k.yml"
  fi
  prometheus --config.file="$tmp/shard-$k.yml" --storage.tsdb.path="$tmp/shard-$k" \
    --storage.tsdb.retention.time=30d --web.listen-address="127.0.0.1:$port" --log.level=warn \
    "${head_args[@]}" >"$tmp/shard-$k.log" 2>&1 &
  pids+=("$!")
  shard_pid[k]=$!
  shard_url[k]=http://127.0.0.1:$port
  wait_http "${shard_url[k]}/-/ready" 120 "$!" || { fail "shard $k did not start"; tail -n 5 "$tmp/shard-$k.log"; finish; }
done
pass "$shards shards ready"

if ((history > 0)); then
  section "the heads: the last $head minutes into every shard and VictoriaMetrics"
  t0=$SECONDS
  senders=$(($(nproc) / shards / 2 > 1 ? $(nproc) / shards / 2 : 1))
  work=()
  for ((k = 0; k < shards; k++)); do
    python3 scripts/fleet/head.py --prom "${shard_url[k]}" --fleet-history "$FLEET_HISTORY_BIN" \
      --captures "$captures" --nodes "$total" --node-range "$((k * stride)):$((k * stride + nodes))" \
      --origin "$origin" --interval 15 --history-from "$origin" --from "$head_from" --to "$hist_to" \
      --promtool "$PROMTOOL" --blocks "$tmp/shard-$k" --work "$tmp/head-$k" --senders "$senders" \
      --also "http://127.0.0.1:$vm_port/api/v1/write" --catch-up alerts/*.yaml >"$tmp/head-$k.log" 2>&1 &&
      cp "$tmp/shard-$k-full.yml" "$tmp/shard-$k.yml" && kill -HUP "${shard_pid[k]}" &&
      python3 scripts/fleet/head.py wait-config "${shard_url[k]}" >>"$tmp/head-$k.log" 2>&1 &
    work+=("$!")
  done
  for ((k = 0; k < shards; k++)); do
    if wait "${work[k]}"; then
      pass "shard $k: $(grep '^head:' "$tmp/head-$k.log"), scraping and evaluating"
    else
      fail "shard $k: writing its head: $(tail -n 2 "$tmp/head-$k.log" | cut -c1-300)"
    fi
  done
  curl -fsS "http://127.0.0.1:$vm_port/internal/force_flush" >/dev/null 2>&1 || true
  echo "      (heads written and every shard scraping in $((SECONDS - t0)) s)"
  ((failed == 0)) || finish
fi

if ((summary_days > 0)); then
  section "$summary_days days of the advisor's summaries into VictoriaMetrics"
  t0=$SECONDS
  work=()
  for ((k = 0; k < shards; k++)); do
    python3 scripts/fleet/summaries.py --prom "${shard_url[k]}" --vm "http://127.0.0.1:$vm_port" \
      --rules "$tmp/rules/tessera-advisor.yaml" --work "$tmp/summaries-$k" --days "$summary_days" \
      >"$tmp/summaries-$k.log" 2>&1 &
    work+=("$!")
  done
  for ((k = 0; k < shards; k++)); do
    if wait "${work[k]}"; then
      pass "shard $k's summaries: $(tail -n 1 "$tmp/summaries-$k.log" | cut -c1-200)"
    else
      fail "shard $k's summaries: $(tail -n 2 "$tmp/summaries-$k.log" | cut -c1-300)"
    fi
  done
  echo "      ($((SECONDS - t0)) s)"
fi

if ((history > 0)); then
  settles=()
  for ((k = 0; k < shards; k++)); do
    python3 scripts/fleet/settle.py --prom "${shard_url[k]}" --min 30 --max "${FLEET_SETTLE_MAX:-300}" >"$tmp/settle-$k.log" 2>&1 &
    settles+=("$!")
  done
  for p in "${settles[@]}"; do wait "$p" || true; done
  for ((k = 0; k < shards; k++)); do echo "      shard $k: $(tail -n 1 "$tmp/settle-$k.log")"; done
fi

section "every shard's rule groups for $seconds s"
sides=()
for ((k = 0; k < shards; k++)); do sides+=(--side "shard-$k=${shard_url[k]}"); done
times_out=$tmp/group-times.json
python3 scripts/fleet/group_times.py "${sides[@]}" --seconds "$seconds" --eval 15 \
  --history-end "$hist_to" --info "nodes_per_shard=$nodes" --info "shards=$shards" --out "$times_out" ||
  fail "timing the shards' groups"
waits=()
for ((k = 0; k < shards; k++)); do
  python3 tests/prometheus/wait_rules.py --prom "${shard_url[k]}" --rounds 2 --timeout 150 >"$tmp/wait-$k.log" 2>&1 &
  waits+=("$!")
done
for ((k = 0; k < shards; k++)); do
  if wait "${waits[k]}"; then
    pass "shard $k: $(cat "$tmp/wait-$k.log")"
  else
    fail "shard $k: $(cat "$tmp/wait-$k.log")"
  fi
done

section "the global layer"
args=(--global "http://127.0.0.1:$vm_port" --dashboards dashboards/*.json --tessera "$TESSERA_BIN"
  --seconds "$seconds" --history-seconds "$((head * 60))" --history-from "${head_from:-0}" --out "$tmp/global.json")
for ((k = 0; k < shards; k++)); do args+=(--shard "${shard_url[k]}"); done
set +e
python3 scripts/fleet/global_check.py "${args[@]}" 2>&1 | tee "$tmp/global.log" | grep -v '^ok    dashboard '
rc=${PIPESTATUS[0]}
set -e
read -r p f < <(sed -nE 's/^global: ([0-9]+) passed, ([0-9]+) failed$/\1 \2/p' "$tmp/global.log") || true
echo "      ($(grep -c '^ok    dashboard ' "$tmp/global.log") dashboard queries answered through the global layer)"
passed=$((passed + ${p:-0}))
failed=$((failed + ${f:-1}))
((rc == 0)) || [[ -n ${f:-} ]] || fail "global_check.py exited $rc"
if [[ -n $out ]]; then
  python3 - "$times_out" "$tmp/global.json" "$out" "$history" "$head" <<'EOF'
import json, sys
times, glob_, out, history, head = sys.argv[1:6]
res = {"history_minutes": int(history), "head_minutes": int(head), "shards": json.load(open(times))}
try:
    res["global"] = json.load(open(glob_))
except (OSError, ValueError):
    res["global"] = None
json.dump(res, open(out, "w"), indent=1, sort_keys=True)
EOF
fi
finish

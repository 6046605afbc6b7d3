#!/usr/bin/env bash
# A fleet above one Prometheus: SHARDS Prometheus servers, each scraping its own replayed
# nodes (one cluster a shard, as a Prometheus per cluster would), each evaluating tessera's
# rules, each remote-writing everything it holds (scraped samples, recorded series, ALERTS) to
# one VictoriaMetrics, the global layer; then scripts/fleet/global_check.py checks that the
# fleet-wide figures, every dashboard query and `tessera advise` work there unchanged.
#
#   scripts/fleet/shards.sh [--shards 4] [--nodes 3] [--seconds 90]
#
# --nodes is per shard; --seconds, in 15-s rule rounds counted on every shard (not slept).
#
# The nodes are scripts/fleet.sh --replay's (one `fleet-history serve` for all, no history):
# node n of shard k is fleet node k*NODES+n, its cluster label fleet-shard-k. Rules as
# tests/prometheus/rules_for_test.py writes them (every group every 15 s, `for:` 0s).
# Needs prometheus, victoria-metrics, python3 with PyYAML, curl, fleet-history and tessera
# (release builds; TESSERA_BIN, FLEET_HISTORY_BIN). Last line: "N passed, M failed".
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/../.."
TESSERA_BIN=${TESSERA_BIN:-target/release/tessera}
FLEET_HISTORY_BIN=${FLEET_HISTORY_BIN:-target/release/fleet-history}
shards=4 nodes=3 seconds=90 out=""
while (($#)); do
  case $1 in
    --shards) shards=$2; shift ;;
    --nodes) nodes=$2; shift ;;
    --seconds) seconds=$2; shift ;;
    --out) out=$2; shift ;;
    *) echo "shards.sh: unknown argument $1" >&2; exit 2 ;;
  esac
  shift
done

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
start_watchdog shards.sh "$((seconds + shards * nodes * 2 + 300))"
pids+=("$watchdog_pid")
finish() { echo; echo "$passed passed, $failed failed"; ((failed == 0)); exit; }

section "prerequisites"
need_tools prometheus victoria-metrics python3 curl || finish
[[ -x $FLEET_HISTORY_BIN ]] || { fail "missing $FLEET_HISTORY_BIN (cargo build --release -p fleet-history)"; finish; }

total=$((shards * nodes))
captures=$tmp/captures
mkdir -p "$captures" && tar xJf tests/data/fleet-captures-16.tar.xz -C "$captures"
replay_port=$(free_port)
now=$(date +%s)
"$FLEET_HISTORY_BIN" serve --captures "$captures" --nodes "$total" --origin "$((now / 15 * 15 - 3600))" \
  --interval 15 --listen "127.0.0.1:$replay_port" >"$tmp/replay.log" 2>&1 &
pids+=("$!")
wait_http "http://127.0.0.1:$replay_port/metrics?node=0" 30 "$!" || { fail "fleet-history serve did not start"; finish; }
pass "$total replayed nodes ($((total * 9)) GPUs) serving"

section "the global layer: VictoriaMetrics"
vm_port=$(free_port)
victoria-metrics -storageDataPath="$tmp/vm" -httpListenAddr="127.0.0.1:$vm_port" \
  -search.latencyOffset=0s -search.disableCache -loggerLevel=WARN >"$tmp/vm.log" 2>&1 &
pids+=("$!")
wait_http "http://127.0.0.1:$vm_port/health" 60 "$!" || { fail "VictoriaMetrics did not start"; finish; }
pass "VictoriaMetrics on 127.0.0.1:$vm_port"

section "$shards shards of $nodes nodes, each a Prometheus with tessera's rules"
python3 tests/prometheus/rules_for_test.py "$tmp/rules" alerts/*.yaml
shard_urls=()
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
    printf '      - labels: {cluster: fleet-shard-%s}\n        targets: [' "$k"
    for ((n = 0; n < nodes; n++)); do
      i=$((k * nodes + n))
      ((n)) && printf ', '
      printf 'node-%s' "$i"
    done
    printf ']\n    relabel_configs:\n'
    printf "      - {source_labels: [__address__], regex: 'node-([0-9]+)', target_label: __param_node}\n"
    printf '      - {source_labels: [__address__], target_label: instance}\n'
    printf "      - {target_label: __address__, replacement: '127.0.0.1:%s'}\n" "$replay_port"
  } >"$tmp/shard-$k.yml"
  prometheus --config.file="$tmp/shard-$k.yml" --storage.tsdb.path="$tmp/shard-$k" \
    --web.listen-address="127.0.0.1:$port" --log.level=warn >"$tmp/shard-$k.log" 2>&1 &
  pids+=("$!")
  wait_http "http://127.0.0.1:$port/-/ready" 60 "$!" || { fail "shard $k did not start"; tail -n 5 "$tmp/shard-$k.log"; finish; }
  shard_urls+=(--shard "http://127.0.0.1:$port")
done
pass "$shards shards ready"

# Rounds counted, not seconds: every shard's groups evaluate --rounds more times (at 15 s,
# enough for the [5m] windows to hold minutes), all shards waited on at once.
rounds=$(((seconds + 14) / 15))
section "$rounds rule rounds on every shard"
waits=()
for ((k = 0; k < shards; k++)); do
  python3 tests/prometheus/wait_rules.py --prom "${shard_urls[2 * k + 1]}" --rounds "$rounds" \
    --timeout "$((rounds * 15 + 120))" >"$tmp/wait-$k.log" 2>&1 &
  waits+=("$!")
done
for ((k = 0; k < shards; k++)); do
  if wait "${waits[k]}"; then
    pass "shard $k: $(cat "$tmp/wait-$k.log")"
  else
    fail "shard $k: $(cat "$tmp/wait-$k.log")"
  fi
done
args=(--global "http://127.0.0.1:$vm_port" "${shard_urls[@]}" --dashboards dashboards/*.json
  --tessera "$TESSERA_BIN" --seconds "$seconds")
[[ -n $out ]] && args+=(--out "$out")
set +e
python3 scripts/fleet/global_check.py "${args[@]}" 2>&1 | tee "$tmp/global.log" | grep -v '^ok    dashboard '
rc=${PIPESTATUS[0]}
set -e
read -r p f < <(sed -nE 's/^global: ([0-9]+) passed, ([0-9]+) failed$/\1 \2/p' "$tmp/global.log") || true
echo "      ($(grep -c '^ok    dashboard ' "$tmp/global.log") dashboard queries answered through the global layer)"
passed=$((passed + ${p:-0}))
failed=$((failed + ${f:-1}))
((rc == 0)) || [[ -n ${f:-} ]] || fail "global_check.py exited $rc"
finish

#!/usr/bin/env bash
# Two rule sets side by side on one replayed fleet: two Prometheus processes on copies of the
# same backfilled history, scraping the same `fleet-history serve`, each evaluating one set
# (every group every --eval seconds, `for:` 0s, as scripts/fleet.sh runs them). Both run at
# the same time on the same cores, so whatever else loads the machine loads both alike, and
# neither's rules read gaps (as swapping the rule files on one Prometheus would leave in the
# series one set records and the other does not).
#
#   scripts/fleet/ab.sh --a DIR --b DIR [--nodes 56] [--history-hours 2] [--seconds 600]
#       [--eval 15] [--out FILE.json] [--head-minutes M [--head-side a|b]]
#       # FLEET_SETTLE_MAX: the longest wait for the compactor (300 s)
#
# Every `*.rollup` group of each set is recorded over the history first (promtool tsdb
# create-blocks-from rules, as scripts/fleet/layered.py does), so the rules that read rollups
# read hours of them. Then, for --seconds, every round of every group is read from
# prometheus_rule_group_last_duration_seconds (one value per evaluation, keyed by its
# timestamp) and every rule's evaluationTime from /api/v1/rules. Prints, per group, A's and
# B's median / max and rounds (and the medians of the first and second half of the rounds),
# and the slowest rules of each; --out writes them as JSON, with every round and the age of
# the live data at it.
# --head-minutes M: the history's last M minutes go into each side's head instead of blocks
# (scripts/fleet/head.py, as scripts/fleet.sh --head-minutes), each side's rollups recorded by
# it over both parts; the two sides' heads are written at once and may end a scrape apart.
# --head-side a (or b): only that side's head is written, the other holds the whole history
# in blocks, as without --head-minutes: with the same rules on both sides (--a alerts --b
# alerts), what reading the backfilled blocks adds to each group, under the same load.
# Needs prometheus/promtool (2.42+), python3 with PyYAML, curl, FLEET_HISTORY_BIN.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
FLEET_HISTORY_BIN=${FLEET_HISTORY_BIN:-target/release/fleet-history}
PROMTOOL=${PROMTOOL:-promtool}
nodes=56 history=2 seconds=600 eval=15 scrape=15 out="" a="" b="" head=0 head_side=both
captures_src=tests/data/fleet-captures-16.tar.xz
while (($#)); do
  case $1 in
    --a) a=$2; shift ;;
    --b) b=$2; shift ;;
    --nodes) nodes=$2; shift ;;
    --history-hours) history=$2; shift ;;
    --seconds) seconds=$2; shift ;;
    --eval) eval=$2; shift ;;
    --out) out=$2; shift ;;
    --head-minutes) head=$2; shift ;;
    --head-side) head_side=$2; shift ;;
    *) echo "ab.sh: unknown argument $1" >&2; exit 2 ;;
  esac
  shift
done
[[ -d $a && -d $b ]] || { echo "ab.sh: --a DIR and --b DIR (rule files) are required" >&2; exit 2; }
((head * 60 < history * 3600)) || { echo "ab.sh: --head-minutes must be less than --history-hours" >&2; exit 2; }
[[ $head_side =~ ^(a|b|both)$ ]] || { echo "ab.sh: --head-side a, b or both" >&2; exit 2; }
declare -A in_head
for side in a b; do
  in_head[$side]=0
  if ((head > 0)) && [[ $head_side == both || $head_side == "$side" ]]; then in_head[$side]=1; fi
done
. scripts/lib/harness.sh
passed=0 failed=0
pids=()
tmp=$(mktemp -d "${TMPDIR:-/tmp}/tessera-ab.XXXXXX")
cleanup() {
  stop_pids
  rm -rf "$tmp"
}
trap cleanup EXIT

mkdir -p "$tmp/captures" "$tmp/blocks" "$tmp/blocks-tail"
tar xJf "$captures_src" -C "$tmp/captures"
now=$(date +%s)
hist_to=$((now / scrape * scrape))
hist_from=$(((hist_to - history * 3600) / 300 * 300))
origin=$hist_from
# Where the blocks end and the heads start (the end: no head).
head_from=$((head > 0 ? hist_to - head * 60 : 1 << 62))
# backfill FROM TO DIR: [FROM, TO) of every node into DIR.
backfill() {
  FLEET_HISTORY_BIN=$FLEET_HISTORY_BIN PROMTOOL=$PROMTOOL scripts/fleet/blocks.sh "$tmp/captures" "$nodes" "$origin" "$scrape" "$@"
}
t0=$SECONDS
# Blocks up to the heads' start for every side, the rest (and the minutes the backfill took)
# apart, for a side that holds it all in blocks.
backfill "$hist_from" "$((hist_to < head_from ? hist_to : head_from))" "$tmp/blocks"
if ((!in_head[a] || !in_head[b])); then
  ((head > 0)) && backfill "$head_from" "$hist_to" "$tmp/blocks-tail"
  top=$(($(date +%s) / scrape * scrape))
  if ((top > hist_to)); then backfill "$hist_to" "$top" "$tmp/blocks-tail"; hist_to=$top; fi
fi
echo "backfilled $nodes nodes ($((nodes * 9)) GPUs) from $hist_from to $hist_to in $((SECONDS - t0)) s" \
  "$( ((head > 0)) && echo "(in the head: A $((in_head[a] ? head : 0)), B $((in_head[b] ? head : 0)) min from $head_from on)")"

replay_port=$(free_port)
"$FLEET_HISTORY_BIN" serve --captures "$tmp/captures" --nodes "$nodes" --origin "$origin" \
  --interval "$scrape" --listen "127.0.0.1:$replay_port" >"$tmp/replay.log" 2>&1 &
pids+=("$!")
wait_http "http://127.0.0.1:$replay_port/metrics?node=0" 30 "$!"

declare -A port prom_pid
settles=()
for side in a b; do
  dir=${!side}
  python3 tests/prometheus/rules_for_test.py "$tmp/rules-$side" "$dir"/*.yaml
  cp -al "$tmp/blocks" "$tmp/prom-$side"
  ((in_head[$side])) || cp -al "$tmp/blocks-tail"/. "$tmp/prom-$side"/
  port[$side]=$(free_port)
  python3 - "$scrape" "$eval" "$tmp/rules-$side" "$nodes" "$replay_port" >"$tmp/prometheus-$side.yml" <<'EOF'
import glob
import sys
scrape, ev, rules, nodes, replay = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4]), sys.argv[5]
print(f"global:\n  scrape_interval: {scrape}s\n  scrape_timeout: 10s\n  evaluation_interval: {ev}s")
print("rule_files:")
for f in sorted(glob.glob(rules + "/*.yaml")):
    print(f"  - {f}")
print("scrape_configs:\n  - job_name: tessera\n    static_configs:")
for c in range((nodes + 49) // 50):
    ts = [f"fleet-{i // 50}-gpu-{i:05d}" for i in range(c * 50, min(nodes, c * 50 + 50))]
    print(f"      - labels: {{cluster: fleet-{c}}}\n        targets: [{', '.join(ts)}]")
print("    relabel_configs:")
print("      - {source_labels: [__address__], regex: 'fleet-[0-9]+-gpu-0*([0-9]+)', target_label: __param_node}")
print("      - {source_labels: [__address__], target_label: instance}")
print(f"      - {{target_label: __address__, replacement: '127.0.0.1:{replay}'}}")
EOF
  head_args=()
  if ((in_head[$side])); then
    # Neither scrapes nor rules while the head is written (scripts/fleet.sh says why).
    cp "$tmp/prometheus-$side.yml" "$tmp/prometheus-$side-full.yml"
    sed -n '/^rule_files:/q;p' "$tmp/prometheus-$side-full.yml" >"$tmp/prometheus-$side.yml"
    head_args=(--web.enable-remote-write-receiver)
  fi
  prometheus --config.file="$tmp/prometheus-$side.yml" --storage.tsdb.path="$tmp/prom-$side" \
    --storage.tsdb.retention.time=30d --web.listen-address="127.0.0.1:${port[$side]}" --log.level=warn \
    "${head_args[@]}" >"$tmp/prometheus-$side.log" 2>&1 &
  pids+=("$!")
  prom_pid[$side]=$!
  wait_http "http://127.0.0.1:${port[$side]}/-/ready" 120 "$!"
done
echo "A: $a on :${port[a]}, B: $b on :${port[b]}"
# The rollups over the history, recorded on each side from its own raw samples (both at once).
rollups() {
  local side=$1
  python3 - "$tmp/rules-$side" "$tmp/rollups-$side.yaml" <<'EOF2'
import glob, sys, yaml
groups = [g for f in sorted(glob.glob(sys.argv[1] + "/*.yaml")) for g in yaml.safe_load(open(f))["groups"]
          if g["name"].endswith(".rollup")]
for g in groups:
    g["interval"] = "5m"
yaml.safe_dump({"groups": groups}, open(sys.argv[2], "w"), sort_keys=False)
EOF2
  grep -q record "$tmp/rollups-$side.yaml" || return 0
  "$PROMTOOL" tsdb create-blocks-from rules --url "http://127.0.0.1:${port[$side]}" --start "$hist_from" \
    --end "$hist_to" --output-dir "$tmp/rollup-blocks-$side" "$tmp/rollups-$side.yaml" >"$tmp/rollups-$side.log" 2>&1 &&
    mv "$tmp/rollup-blocks-$side"/01* "$tmp/prom-$side"/ && echo "side $side: rollups recorded over the history"
}
# write_head SIDE: the history's last minutes into that side's head, its rollups with them.
write_head() {
  local side=$1 dir
  dir=$([[ $side == a ]] && echo "$a" || echo "$b")
  python3 scripts/fleet/head.py --prom "http://127.0.0.1:${port[$side]}" --fleet-history "$FLEET_HISTORY_BIN" \
    --captures "$tmp/captures" --nodes "$nodes" --origin "$origin" --interval "$scrape" --history-from "$hist_from" \
    --from "$head_from" --to "$hist_to" --promtool "$PROMTOOL" --blocks "$tmp/prom-$side" --work "$tmp/head-$side" \
    --senders "$(( $(nproc) / 2 > 1 ? $(nproc) / 2 : 1 ))" --catch-up "$dir"/*.yaml >"$tmp/head-$side.log" 2>&1 &&
    cp "$tmp/prometheus-$side-full.yml" "$tmp/prometheus-$side.yml" && kill -HUP "${prom_pid[$side]}" &&
    python3 scripts/fleet/head.py wait-config "http://127.0.0.1:${port[$side]}" &&
    echo "side $side: $(grep '^head:' "$tmp/head-$side.log")"
}
t0=$SECONDS
work=()
for side in a b; do
  if ((in_head[$side])); then write_head "$side" & else rollups "$side" & fi
  work+=("$!")
done
wait "${work[0]}" && wait "${work[1]}" || {
  echo "ab.sh: writing the heads or recording the rollups failed" >&2
  tail -n 5 "$tmp"/head-?.log "$tmp"/rollups-?.log >&2 2>/dev/null
  exit 1
}
# The live data's age is measured from the latest end of the history.
for side in a b; do
  if ((in_head[$side])); then
    end=$(tail -n 1 "$tmp/head-$side.log")
    ((end > hist_to)) && hist_to=$end
  fi
done
echo "heads and rollups in $((SECONDS - t0)) s"
for side in a b; do
  python3 scripts/fleet/settle.py --prom "http://127.0.0.1:${port[$side]}" --min 90 --max "${FLEET_SETTLE_MAX:-300}" >"$tmp/settle-$side.log" 2>&1 &
  settles+=("$!")
done
for p in "${settles[@]}"; do wait "$p" || true; done
for side in a b; do echo "side $side: $(tail -n 1 "$tmp/settle-$side.log")"; done
echo "measuring for $seconds s from $(date +%s)"
python3 scripts/fleet/group_times.py --side "A=http://127.0.0.1:${port[a]}" --side "B=http://127.0.0.1:${port[b]}" \
  --seconds "$seconds" --eval "$eval" --history-end "$hist_to" --info "nodes=$nodes" --info "a=$a" --info "b=$b" \
  ${out:+--out "$out"}

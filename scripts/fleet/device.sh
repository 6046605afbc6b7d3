#!/usr/bin/env bash
# The fleet runs on the `run` tool's 16-core host, where nothing can be installed: binaries
# come in a carried folder ($1: bins.tar.xz with prometheus, promtool, victoria-metrics,
# vmagent, vmalert, tessera; fleet-history; py/ with a pure-Python PyYAML; optionally
# COMMIT, the commit the scripts come from, where the tree there is not a git checkout).
#
#   scripts/fleet/device.sh CARRY OUT RUN...    RUN: NAME:NODES:HISTORY_HOURS:LIVE_SECONDS:SUMMARY_DAYS[:RULES_DIR]
#
# Each RUN is one scripts/fleet.sh --replay at that size; its JSON and log go to OUT, the
# engines' own logs to OUT/logs.tgz (the tool brings back 8 files at most). A NAME that starts
# with "ab-" runs scripts/fleet/ab.sh instead: RULES_DIR (A) beside the shipped alerts/ (B) on
# one backfilled history, LIVE_SECONDS of rounds (SUMMARY_DAYS is not used).
# A NAME that starts with "shards-" runs scripts/fleet/shards.sh: RULES_DIR is the number of
# shards, NODES per shard, HISTORY_HOURS is read as minutes of history (FLEET_HEAD_MINUTES of
# it in the heads, 70 if unset), SUMMARY_DAYS of the advisor's summaries.
# FLEET_HEAD_MINUTES=M: every run writes its history's last M minutes into Prometheus's head
# instead of blocks (--head-minutes of both scripts); 70 holds every [1h] window.
# FLEET_HEAD_SIDE=a (ab- runs): only side A's head is written, B holds it all in blocks.
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
carry=$1 out=$2
shift 2
bin=/tmp/fleet-bin
mkdir -p "$bin" "$out"
tar xJf "$carry/bins.tar.xz" -C "$bin"
cp "$carry/fleet-history" "$bin/"
export PATH=$bin:$PATH PYTHONPATH=$PWD/$carry/py
export TESSERA_BIN=$bin/tessera FLEET_HISTORY_BIN=$bin/fleet-history
[[ -f $carry/COMMIT ]] && export FLEET_COMMIT=$(cat "$carry/COMMIT")
head_args=()
[[ -n ${FLEET_HEAD_MINUTES:-} ]] && head_args=(--head-minutes "$FLEET_HEAD_MINUTES")
ab_args=()
[[ -n ${FLEET_HEAD_SIDE:-} ]] && ab_args=(--head-side "$FLEET_HEAD_SIDE")
{
  nproc
  free -g
  df -h /tmp /dev/shm
  uptime
} >"$out/host.txt" 2>&1
for r in "$@"; do
  IFS=: read -r name nodes hours live days rules <<<"$r"
  t0=$SECONDS
  if [[ $name == shards-* ]]; then
    PYTHONUNBUFFERED=1 timeout "${FLEET_RUN_LIMIT:-560}" scripts/fleet/shards.sh --shards "${rules:-4}" --nodes "$nodes" \
      --history-minutes "$hours" --head-minutes "${FLEET_HEAD_MINUTES:-70}" --summary-days "$days" \
      --seconds "$live" --out "$out/$name.json" >"$out/$name.log" 2>&1
    echo "$name: exit $? after $((SECONDS - t0)) s" | tee -a "$out/host.txt"
    grep -v '^ok    dashboard ' "$out/$name.log" | tail -n 60
    continue
  fi
  if [[ $name == ab-* ]]; then
    PYTHONUNBUFFERED=1 timeout "${FLEET_RUN_LIMIT:-560}" scripts/fleet/ab.sh --a "${rules:?ab- runs name the A rules}" --b alerts \
      --nodes "$nodes" --history-hours "$hours" --seconds "$live" --eval "${FLEET_EVAL:-15}" --out "$out/$name.json" \
      "${head_args[@]}" "${ab_args[@]}" >"$out/$name.log" 2>&1
    echo "$name: exit $? after $((SECONDS - t0)) s" | tee -a "$out/host.txt"
    tail -n 30 "$out/$name.log"
    continue
  fi
  FLEET_RULES=${rules:-alerts} PYTHONUNBUFFERED=1 TESSERA_TEST_TIMEOUT=${FLEET_RUN_LIMIT:-560} scripts/fleet.sh --replay tests/data/fleet-captures-16.tar.xz \
    --nodes "$nodes" --history-hours "$hours" --seconds "$live" --summary-days "$days" \
    --scrape 15 --eval "${FLEET_EVAL:-15}" --out "$out/$name.json" --keep "/tmp/fleet-logs/$name" \
    "${head_args[@]}" >"$out/$name.log" 2>&1
  echo "$name: exit $? after $((SECONDS - t0)) s" | tee -a "$out/host.txt"
  tail -n 3 "$out/$name.log"
  tar czf "$out/logs.tgz" -C /tmp fleet-logs 2>/dev/null
done

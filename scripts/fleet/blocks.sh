#!/usr/bin/env bash
# A replayed fleet's history as Prometheus blocks (scripts/fleet/ab.sh, scripts/fleet/shards.sh):
# [FROM, TO) of nodes A..B-1 in chunks, each written as OpenMetrics to /dev/shm, turned into a
# block in DIR by promtool (single-threaded, hence one chunk per core at once) and removed.
#
#   scripts/fleet/blocks.sh CAPTURES NODES ORIGIN INTERVAL FROM TO DIR [A:B]
#
# Chunks hold at most 8 M samples (promtool's memory), cut on 10-minute to 2-hour boundaries.
# Needs FLEET_HISTORY_BIN and promtool (PROMTOOL).
set -euo pipefail
captures=$1 nodes=$2 origin=$3 interval=$4 from=$5 to=$6 dir=$7 range=${8:-0:$2}
FLEET_HISTORY_BIN=${FLEET_HISTORY_BIN:-target/release/fleet-history}
PROMTOOL=${PROMTOOL:-promtool}
((to > from)) || exit 0
count=$((${range#*:} - ${range%:*}))
per_s=$((count * 480 / interval + 1))
chunk=300
for c in 7200 3600 1800 900 600; do
  if ((c * per_s <= 8000000)); then chunk=$c; break; fi
done
shm=/dev/shm
[[ -d $shm && -w $shm ]] || shm=$dir
mkdir -p "$dir"
for ((s = from / chunk * chunk; s < to; s += chunk)); do
  echo "$((s > from ? s : from)) $((s + chunk < to ? s + chunk : to))"
done | xargs -P "$(nproc)" -L 1 bash -c '
  f=$0/blocks-$$-$9.om
  "$1" openmetrics --captures "$2" --nodes "$3" --origin "$4" --interval "$5" --node-range "$8" --from "$9" --to "${10}" >"$f" 2>/dev/null &&
    "$6" tsdb create-blocks-from openmetrics "$f" "$7" >/dev/null; rc=$?; rm -f "$f"; exit $rc' \
  "$shm" "$FLEET_HISTORY_BIN" "$captures" "$nodes" "$origin" "$interval" "$PROMTOOL" "$dir" "$range"

#!/bin/bash
# The probe's launch overhead per probe setting, in interleaved rounds (the plain loop drifts
# between rounds, so each variant is compared with the plain run of its own round; see
# overhead_table.py). Needs a tessera listening on $SOCK.
#   PROBE=... SOCK=... OUT=dir REPEAT=4 PIN=8-11 \
#     VARIANTS="- TESSERA_PROBE_OVERHEAD=0.002 TESSERA_PROBE_SLOT_MS=100" bash overhead_variants.sh
# Each variant is one environment assignment for the probe; "-" is the shipped defaults.
# PIN runs every process on those CPUs (taskset), so that where the scheduler puts the
# launching thread does not move the result. The probe's stderr goes to probe-stderr.txt.
set -u
cd "$(dirname "$0")"
OUT=${OUT:-./out}; mkdir -p "$OUT"
pin=(); [ -n "${PIN:-}" ] && pin=(taskset -c "$PIN")
for _ in $(seq "${REPEAT:-4}"); do
  "${pin[@]}" python3 overhead.py plain | tee -a "$OUT/overhead.txt"
  for v in ${VARIANTS:-- TESSERA_PROBE_OVERHEAD=0.002 TESSERA_PROBE_OVERHEAD=1}; do
    if [ "$v" = - ]; then set -- probe; else set -- "probe-$v" "$v"; fi
    env "${@:2}" TESSERA_PROBE_SOCKET="$SOCK" CUDA_INJECTION64_PATH="$PROBE" "${pin[@]}" \
      python3 overhead.py "$1" 2>>"$OUT/probe-stderr.txt" | tee -a "$OUT/overhead.txt"
    rc=${PIPESTATUS[0]}
    echo "== $1 (exit status $rc)" >> "$OUT/probe-stderr.txt"
    [ "$rc" -eq 0 ] || echo "$1: exit status $rc" | tee -a "$OUT/overhead.txt"
  done
done
exit 0

#!/bin/bash
# The probe's launch overhead per probe setting, in interleaved rounds (the plain loop drifts
# between rounds, so each variant is compared with the plain run of its own round; see
# overhead_table.py). Needs a tessera listening on $SOCK.
#   PROBE=... SOCK=... OUT=dir REPEAT=4 \
#     VARIANTS="- TESSERA_PROBE_OVERHEAD=0.002 TESSERA_PROBE_SLOT_MS=100" bash overhead_variants.sh
# Each variant is one environment assignment for the probe; "-" is the shipped defaults.
set -u
cd "$(dirname "$0")"
OUT=${OUT:-./out}; mkdir -p "$OUT"
for _ in $(seq "${REPEAT:-4}"); do
  python3 overhead.py plain | tee -a "$OUT/overhead.txt"
  for v in ${VARIANTS:-- TESSERA_PROBE_OVERHEAD=0.002 TESSERA_PROBE_OVERHEAD=1}; do
    if [ "$v" = - ]; then set -- probe; else set -- "probe-$v" "$v"; fi
    env "${@:2}" TESSERA_PROBE_SOCKET="$SOCK" CUDA_INJECTION64_PATH="$PROBE" python3 overhead.py "$1" | tee -a "$OUT/overhead.txt"
  done
done
exit 0

#!/bin/bash
# The probe's launch overhead against its budget (TESSERA_PROBE_OVERHEAD), interleaved rounds.
# Needs a tessera listening on $SOCK.   PROBE=... SOCK=... OUT=dir BUDGETS="0.02 0.005 1" REPEAT=4
set -u
cd "$(dirname "$0")"
OUT=${OUT:-./out}; mkdir -p "$OUT"
for _ in $(seq "${REPEAT:-4}"); do
  python3 overhead.py plain | tee -a "$OUT/budget.txt"
  for b in ${BUDGETS:-0.02 0.005 1}; do
    TESSERA_PROBE_OVERHEAD=$b TESSERA_PROBE_SOCKET=$SOCK CUDA_INJECTION64_PATH=$PROBE python3 overhead.py "probe-budget-$b" | tee -a "$OUT/budget.txt"
  done
done
exit 0

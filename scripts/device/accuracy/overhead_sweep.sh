#!/bin/bash
# The probe's launch overhead against its duty-cycle slot length, and a launch-bound process's
# busy share traced in full vs in duty cycles. Needs a tessera listening on $SOCK.
#   PROBE=... SOCK=... OUT=dir SLOTS="20 100 250" REPEAT=3 bash overhead_sweep.sh
set -u
cd "$(dirname "$0")"
OUT=${OUT:-./out}; mkdir -p "$OUT"
for _ in $(seq "${REPEAT:-3}"); do
  python3 overhead.py plain | tee -a "$OUT/sweep.txt"
  for slot in ${SLOTS:-20 100 250}; do
    TESSERA_PROBE_SLOT_MS=$slot TESSERA_PROBE_SOCKET=$SOCK CUDA_INJECTION64_PATH=$PROBE python3 overhead.py "probe-slot-$slot" | tee -a "$OUT/sweep.txt"
  done
  TESSERA_PROBE_OVERHEAD=1 TESSERA_PROBE_SOCKET=$SOCK CUDA_INJECTION64_PATH=$PROBE python3 overhead.py probe-full | tee -a "$OUT/sweep.txt"
done
exit 0

#!/bin/bash
# The probe's launch cost inside one process (overhead_within.py): the probe attaches after
# START_MS, so each process times its loop before and after; a run without the probe is the
# control for drift within a process. Needs a tessera listening on $SOCK.
#   PROBE=... SOCK=... OUT=dir REPEAT=3 SECONDS_RUN=20 START_MS=8000 \
#     VARIANTS="- TESSERA_PROBE_OVERHEAD=1" bash overhead_within.sh
# Each variant is one environment assignment for the probe; "-" is the shipped defaults.
set -u
cd "$(dirname "$0")"
OUT=${OUT:-./out}; mkdir -p "$OUT"
secs=${SECONDS_RUN:-20}
for i in $(seq "${REPEAT:-3}"); do
  BLOCKS_OUT="$OUT/blocks-plain-$i.txt.gz" python3 overhead_within.py plain "$secs" | tee -a "$OUT/within.jsonl"
  for v in ${VARIANTS:-- TESSERA_PROBE_OVERHEAD=1}; do
    if [ "$v" = - ]; then set -- probe; else set -- "probe-$v" "$v"; fi
    tag=$(echo "$1" | tr -c 'A-Za-z0-9_.\n-' _)
    log="$OUT/toggles-$tag-$i.txt"; rm -f "$log"
    env "${@:2}" TESSERA_PROBE_SOCKET="$SOCK" CUDA_INJECTION64_PATH="$PROBE" \
      TESSERA_PROBE_START_MS="${START_MS:-8000}" TESSERA_PROBE_TRACE_LOG="$log" \
      BLOCKS_OUT="$OUT/blocks-$tag-$i.txt.gz" \
      python3 overhead_within.py "$1" "$secs" "$log" 2>>"$OUT/probe-stderr.txt" | tee -a "$OUT/within.jsonl"
    rc=${PIPESTATUS[0]}
    [ "$rc" -eq 0 ] || echo "$1: exit status $rc" | tee -a "$OUT/within.jsonl"
  done
done
exit 0

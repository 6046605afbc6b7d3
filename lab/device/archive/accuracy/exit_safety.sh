#!/bin/bash
# Does the probe ever hurt its host process, at exit above all? Runs, ROUNDS times each and
# for each probe setting in VARIANTS ("-" is the shipped defaults, else one VAR=value): four
# threads launching on their own streams beside a copying thread (stress_threads.py, results
# checked), then a launch-bound process that exits while traced in duty cycles (the exit path
# tears CUDA down). Prints each exit status and a count. Needs a tessera listening on $SOCK.
#   PROBE=... SOCK=... OUT=dir ROUNDS=3 VARIANTS="- TESSERA_PROBE_OVERHEAD=1" bash exit_safety.sh
set -u
cd "$(dirname "$0")"
OUT=${OUT:-./out}; mkdir -p "$OUT"
export TESSERA_PROBE_SOCKET=$SOCK CUDA_INJECTION64_PATH=$PROBE
failed=0; runs=0
for i in $(seq "${ROUNDS:-3}"); do
  for v in ${VARIANTS:--}; do
    if [ "$v" = - ]; then set -- env; else set -- env "$v"; fi
    "$@" timeout 90 python3 stress_threads.py 12 > "$OUT/stress-$i.out" 2>&1; rc=$?
    echo "stress $i ($v): rc $rc; $(grep '^stress:' "$OUT/stress-$i.out")"
    [ $rc -eq 0 ] || failed=$((failed + 1))
    "$@" timeout 90 python3 workload.py launch 8 "/tmp/exit-$i.json" > "$OUT/exit-$i.out" 2>&1; rc=$?
    echo "launch-then-exit $i ($v): rc $rc"
    [ $rc -eq 0 ] || failed=$((failed + 1))
    runs=$((runs + 2))
  done
done
echo "exit safety: $failed of $runs processes failed"

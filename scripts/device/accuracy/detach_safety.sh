#!/bin/bash
# Does detaching CUPTI between traced slots ever hurt the host process? Runs, ROUNDS times
# each: four threads launching on their own streams beside a copying thread (stress_detach.py,
# results checked), and a launch-bound process that exits while throttled (the exit path
# tears CUDA down). Python's faulthandler prints where a crash happened. Needs a tessera
# listening on $SOCK.  PROBE=... SOCK=... OUT=dir ROUNDS=3 bash detach_safety.sh
set -u
cd "$(dirname "$0")"
OUT=${OUT:-./out}; mkdir -p "$OUT"
export TESSERA_PROBE_SOCKET=$SOCK CUDA_INJECTION64_PATH=$PROBE TESSERA_PROBE_DEBUG=1
crashes=0
for i in $(seq "${ROUNDS:-3}"); do
  timeout 90 python3 -X faulthandler stress_detach.py 12 2> "$OUT/stress-$i.err"; rc=$?
  echo "stress $i: rc $rc; $(grep -c . "$OUT/stress-$i.err") stderr lines; last: $(grep tessera-probe "$OUT/stress-$i.err" | tail -1)"
  [ $rc -eq 0 ] || crashes=$((crashes + 1))
  timeout 90 python3 -X faulthandler workload.py launch 8 /tmp/exit-$i.json 2> "$OUT/exit-$i.err"; rc=$?
  echo "launch-then-exit $i: rc $rc; last: $(grep tessera-probe "$OUT/exit-$i.err" | tail -1)"
  [ $rc -eq 0 ] || crashes=$((crashes + 1))
done
echo "detach safety: $crashes of $((2 * ${ROUNDS:-3})) processes failed"

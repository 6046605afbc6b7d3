#!/bin/bash
# Issue 21, run 4, steps 1 and 1b (docs/validation.md, "Run 4"): kernel records of the suite's
# tenants from PyTorch's profiler (kineto_tenant.py), with truth as suite.py computes it.
# The device machine receives the lead's checkout, not a helper's worktree, so the probe's own
# dump (TESSERA_PROBE_RECORD_LOG) could not travel; these two runs were sent
# inline, from lab/device/accuracy/ of that checkout (the same logic, reformatted here):
#   PART=1 OUT=$OUT bash kineto_records.sh   # each kind alone, four contended cases, records on
#   PART=2 OUT=$OUT bash kineto_records.sh   # graph tenants with records toggled in 20 ms slots
# Each case: tenants start together 12 s on, serve for 10 s; the next case 23 s after.
# Part 1 as run wrote `R attach 0` / `T 0 0` instead of `B`, and kernel names in its shape
# lines (lab/data/accuracy-h100-2026-11-26-run4-step1-starts.json is in the records' clock).
# Writes calib.txt and k.tar.xz.NN (rec.<case>-<i> per tenant, <case>-<i>.json its truth).
set -u
cd "$(dirname "$0")"
ACC=.; [ -e suite.py ] || ACC=../../accuracy   # suite.py is maintained harness
: "${OUT:?}" "${PART:?}"
C=/tmp/c.json
W=$PWD/kineto_tenant.py
r() { # case, records-on fraction, then pairs: kind util
  local n=$1 F=$2; shift 2
  local s; s=$(python3 -c "import time;print(time.time()+12)"); local i=0
  while [ $# -gt 0 ]; do
    python3 "$W" "$OUT/rec.$n-$i" "$F" "$1" "$2" "$s" 10 "$OUT/$n-$i.json" $C & i=$((i+1)); shift 2
  done
  sleep 23; echo "$n $s"
}
g=infer-graph
if [ "$PART" = 1 ]; then
  KINDS="infer-graph micro long" python3 $ACC/suite.py calibrate $C | tee "$OUT/calib.txt"
  r alone-graph40 1 $g 0.4; r alone-micro20 1 micro 0.2; r alone-long30 1 long 0.3
  r ts-4xgraph15 1 $g 0.15 $g 0.15 $g 0.15 $g 0.15
  r ts-graph60-micro10 1 $g 0.6 micro 0.1
  r ts-3xeager15-long20 1 infer-eager 0.15 infer-eager 0.15 infer-eager 0.15 long 0.2
  r ts-graph30-eager30 1 $g 0.3 infer-eager 0.3
else
  KINDS=$g python3 $ACC/suite.py calibrate $C > "$OUT/calib.txt"
  r alone-graph40-t50 0.5 $g 0.4
  r ts-4xgraph15-t50 0.5 $g 0.15 $g 0.15 $g 0.15 $g 0.15
  r ts-4xgraph15-t25 0.25 $g 0.15 $g 0.15 $g 0.15 $g 0.15
fi
wait
cd "$OUT" && tar cf - rec.* *-[0-9].json | xz -T0 | split -b 15M -d - k.tar.xz. && rm -f rec.* *-[0-9].json

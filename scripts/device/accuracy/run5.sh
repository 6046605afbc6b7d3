#!/bin/bash
# Issue 21, run 5 (docs/validation.md, "Run 5"): the rule that withholds a kernel outlasting
# time slices, checked on the cases with a long matmul and on those without, every probe
# writing its record log (for slot_rate.py: what each duty-cycled tenant's slots sample), the
# memory holder again, then an alone long matmul with records always on (its own kernel time
# during the run, against the calibrated truth). Put release builds of tessera and the probe
# in a git-ignored `.dev-*/` folder of the checkout the device receives; from its root, with
# carry [that folder]:
#   DEV=.dev-s30 OUT=$OUT bash scripts/device/accuracy/run5.sh   # ~260 s
# TS_CASES, ALONE_CASES (alone, records always on) and KINDS (what to calibrate) replace the
# defaults below.
#   python3 scripts/device/accuracy/suite_table.py $OUT/suite.jsonl
# Writes to $OUT (at most 8 files come back): card.txt, suite.jsonl, alone.jsonl, calib.txt,
# raw.tgz (every tenant's JSON and tessera's logs), reclog.tar.xz and reclog2.tar.xz
# (rec.<pid> of every probe, alone.<pid> of the alone cases).
set -u
HERE=$(cd "$(dirname "$0")" && pwd)
: "${OUT:?}" "${DEV:?}"
DEV=$(cd "$DEV" && pwd)
mkdir -p "$OUT"
nvidia-smi --query-gpu=name,driver_version,compute_mode,mig.mode.current --format=csv > "$OUT/card.txt" 2>&1
cat "$OUT/card.txt"
rm -rf /tmp/suite-calib.json /tmp/reclog /tmp/run5 && mkdir -p /tmp/reclog /tmp/run5
export TESSERA=$DEV/tessera PROBE=$DEV/libtessera_probe.so
export KINDS=${KINDS:-"infer-graph infer-eager matmul micro long"} DUR=16 LEAD=12
TS_CASES=${TS_CASES:-"ts-6mixed-b ts-3xeager15-long20 ts-micro20-long30 ts-graph60-micro10 \
ts-4xgraph15 ts-graph40-holder"}
TESSERA_PROBE_RECORD_LOG=/tmp/reclog/rec OUT=/tmp/run5/ts CASES="$TS_CASES" \
  timeout 420 bash "$HERE/suite.sh"
TESSERA_PROBE_RECORDS=always TESSERA_PROBE_RECORD_LOG=/tmp/reclog/alone OUT=/tmp/run5/alone \
  CASES="${ALONE_CASES:-alone-long30}" timeout 80 bash "$HERE/suite.sh"
cp /tmp/run5/ts/suite.jsonl "$OUT/suite.jsonl"
cp /tmp/run5/alone/suite.jsonl "$OUT/alone.jsonl"
cp /tmp/run5/ts/calib.txt "$OUT/calib.txt"
# suite.sh leaves each run's raw JSON and logs as raw.tgz beside its suite.jsonl.
tar czf "$OUT/raw.tgz" -C /tmp/run5 ts/raw.tgz alone/raw.tgz
# Two archives, so that neither passes what one file may bring back (16 MiB).
cd /tmp && mapfile -t recs < <(ls reclog/* | sort) && half=$(( (${#recs[@]} + 1) / 2 ))
tar cJf "$OUT/reclog.tar.xz" "${recs[@]:0:half}"
tar cJf "$OUT/reclog2.tar.xz" "${recs[@]:half}"
ls -la "$OUT"

#!/bin/bash
# Issue 21, run 5 (docs/validation.md, "Run 5"): the rule that withholds a kernel outlasting
# time slices, checked on the cases with a long matmul and on those without, every probe
# writing its record log (for slot_rate.py: what each duty-cycled tenant's slots sample), the
# memory holder again, then an alone long matmul with records always on (its own kernel time
# during the run, against the calibrated truth). Put release builds of tessera and the probe
# in a git-ignored `.dev-*/` folder of the checkout the device receives; from its root, with
# carry [that folder]:
#   DEV=.dev-s30 OUT=$OUT bash lab/device/archive/accuracy/run5.sh   # ~260 s
# TS_CASES, ALONE_CASES (alone, records always on), KINDS (what to calibrate) and TS_LIMIT
# (seconds for the time-sliced cases) replace the defaults below; MPS_CASES, when set, run
# under a private MPS daemon (suite.sh's MPS=1) into mps.jsonl; RECORD_LOG=0 runs without
# the record log.
#   python3 lab/device/accuracy/suite_table.py $OUT/ts.jsonl
# Writes to $OUT (at most 8 files come back): card.txt, ts.jsonl, alone.jsonl, mps.jsonl, calib.txt,
# raw.tgz (every tenant's JSON and tessera's logs), reclog.tar.xz and reclog2.tar.xz
# (rec.<pid> of every probe, alone.<pid> of the alone cases).
set -u
HERE=$(cd "$(dirname "$0")" && pwd)
# suite.sh is maintained harness (lab/device/accuracy/); beside this script when both
# folders were carried as one.
ACC=$HERE; [ -e "$ACC/suite.sh" ] || ACC=$(cd "$HERE/../../accuracy" && pwd)
: "${OUT:?}" "${DEV:?}"
DEV=$(cd "$DEV" && pwd)
mkdir -p "$OUT" && OUT=$(cd "$OUT" && pwd)
nvidia-smi --query-gpu=name,driver_version,compute_mode,mig.mode.current --format=csv > "$OUT/card.txt" 2>&1
cat "$OUT/card.txt"
rm -rf /tmp/suite-calib.json /tmp/reclog /tmp/run5 && mkdir -p /tmp/reclog /tmp/run5
export TESSERA=$DEV/tessera PROBE=$DEV/libtessera_probe.so
export KINDS=${KINDS:-"infer-graph infer-eager matmul micro long"} DUR=16 LEAD=12
TS_CASES=${TS_CASES:-"ts-6mixed-b ts-3xeager15-long20 ts-micro20-long30 ts-graph60-micro10 \
ts-4xgraph15 ts-graph40-holder"}
log() { [ "${RECORD_LOG:-1}" = 0 ] || echo "TESSERA_PROBE_RECORD_LOG=/tmp/reclog/$1"; }
env $(log rec) OUT=/tmp/run5/ts CASES="$TS_CASES" timeout "${TS_LIMIT:-420}" bash "$ACC/suite.sh"
if [ -n "${ALONE_CASES-alone-long30}" ]; then
  env TESSERA_PROBE_RECORDS=always $(log alone) OUT=/tmp/run5/alone \
    CASES="${ALONE_CASES-alone-long30}" timeout 80 bash "$ACC/suite.sh"
fi
if [ -n "${MPS_CASES:-}" ]; then
  # suite.sh starts the daemon with private pipe and log folders under /tmp and quits it.
  env $(log mps) OUT=/tmp/run5/mps MPS=1 CASES="$MPS_CASES" timeout 120 bash "$ACC/suite.sh"
  echo quit | CUDA_MPS_PIPE_DIRECTORY=/tmp/mps-pipe nvidia-cuda-mps-control 2>/dev/null
fi
for run in ts alone mps; do
  [ -s /tmp/run5/$run/suite.jsonl ] && cp /tmp/run5/$run/suite.jsonl "$OUT/$run.jsonl"
  # A suite cut off by its limit leaves raw/ untarred.
  [ -d /tmp/run5/$run/raw ] && tar czf /tmp/run5/$run/raw.tgz -C /tmp/run5/$run raw
done
cp /tmp/run5/ts/calib.txt "$OUT/calib.txt"
(cd /tmp/run5 && tar czf "$OUT/raw.tgz" */raw.tgz)
# Two archives, so that neither passes what one file may bring back (16 MiB).
cd /tmp && mapfile -t recs < <(ls reclog/* 2>/dev/null | sort)
if [ ${#recs[@]} -gt 0 ]; then
  half=$(( (${#recs[@]} + 1) / 2 ))
  tar cJf "$OUT/reclog.tar.xz" "${recs[@]:0:half}"
  [ ${#recs[@]} -gt 1 ] && tar cJf "$OUT/reclog2.tar.xz" "${recs[@]:half}"
fi
ls -la "$OUT"

#!/bin/bash
# Issue 21, run 4, step 1: every kernel record of the suite's tenants with the solo estimate the
# probe gave it (TESSERA_PROBE_RECORD_LOG), alone (each kind's true per-shape solo durations)
# and contended, for solo_replay.py. As run on the device machine from the repository root,
# with the release builds and these scripts carried in .dev-i21d/ (tessera,
# libtessera_probe.so, accuracy/ = scripts/device/accuracy/ of this branch):
#   OUT=$OUT bash .dev-i21d/accuracy/solo_measure.sh
# Records are on from
# the start in every tenant (TESSERA_PROBE_RECORDS=always), so the alone cases log them too.
# Writes $OUT/card.txt, suite.jsonl, calib.txt, raw.tgz (the suite's) and records.tar.xz
# (split into records.tar.xz.part-* past 15 MiB): rec.<pid> per tenant.
set -u
HERE=$(cd "$(dirname "$0")" && pwd)
DEV=$(dirname "$HERE")
: "${OUT:?}"
mkdir -p "$OUT"
nvidia-smi --query-gpu=name,driver_version,compute_mode,mig.mode.current --format=csv > "$OUT/card.txt" 2>&1
cat "$OUT/card.txt"
REC=/tmp/reclog; rm -rf "$REC"; mkdir -p "$REC"
export TESSERA=$DEV/tessera PROBE=$DEV/libtessera_probe.so OUT
# Another session's calibration may hold other kinds.
rm -f /tmp/suite-calib.json
export TESSERA_PROBE_RECORD_LOG=$REC/rec TESSERA_PROBE_RECORDS=always
export KINDS="infer-graph matmul micro long" DUR=12 LEAD=11
CASES="alone-graph40 alone-long30 alone-matmul30 alone-micro20 ts-4xgraph15 \
ts-3xeager15-long20 ts-graph60-micro10 ts-graph30-eager30" timeout 245 bash "$HERE/suite.sh"
# The tenants' windows and truths travel with the records, whatever became of the suite.
cp /tmp/*-[0-9].json "$REC/" 2>/dev/null
ls -la "$REC" | head -40
du -sh "$REC"
tar -C "$REC" -cf - . | xz -T0 -6 > /tmp/records.tar.xz
ls -la /tmp/records.tar.xz
if [ "$(stat -c %s /tmp/records.tar.xz)" -gt $((15 << 20)) ]; then
  split -b 15M -d /tmp/records.tar.xz "$OUT/records.tar.xz.part-"
else
  cp /tmp/records.tar.xz "$OUT/"
fi
ls -la "$OUT"

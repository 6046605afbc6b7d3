#!/bin/bash
# Issue 21, run 3 of the suite (docs/validation.md, "Run 3"): the exact commands, as run on the
# device machine from the repository root, with the release builds and these scripts carried
# in .dev-i21c/ (the run tool sends the session's checkout, so the scripts travel with them):
#   .dev-i21c/tessera             this branch's build
#   .dev-i21c/tessera-main        main's build before the idle-window fix (a39a863): BASELINE
#   .dev-i21c/libtessera_probe.so the probe of this branch
#   .dev-i21c/accuracy/           lab/device/accuracy/ of this branch (now also
#                                 lab/device/archive/accuracy/, copied into the same folder)
#   PART=1 OUT=$OUT bash .dev-i21c/accuracy/run3.sh   # alone and time-sliced cases
#   PART=2 OUT=$OUT bash .dev-i21c/accuracy/run3.sh   # MPS cases, then repeats and the rest
# Writes $OUT/card.txt (which GPU ran it) and, per suite run ($OUT, or $OUT/mps and
# $OUT/repeat in part 2), suite.jsonl, calib.txt (when it calibrated) and raw.tgz.
set -u
HERE=$(cd "$(dirname "$0")" && pwd)
# suite.sh is maintained harness (lab/device/accuracy/); beside this script when both
# folders were carried as one.
ACC=$HERE; [ -e "$ACC/suite.sh" ] || ACC=$(cd "$HERE/../../accuracy" && pwd)
DEV=$(dirname "$HERE")
: "${OUT:?}" "${PART:?}"
mkdir -p "$OUT"
nvidia-smi --query-gpu=name,driver_version,compute_mode,mig.mode.current --format=csv > "$OUT/card.txt" 2>&1
cat "$OUT/card.txt"
export TESSERA=$DEV/tessera PROBE=$DEV/libtessera_probe.so BASELINE=$DEV/tessera-main OUT
export KINDS="infer-graph matmul micro long xlong" DUR=16 LEAD=12 ALONE_DUR=24
case $PART in
  1) CASES="alone-long30 alone-xlong30 alone-graph40 alone-matmul30 alone-micro20 holder-alone \
ts-graph40-holder ts-4xgraph15 ts-graph45-matmul25 ts-matmul70-eager10 \
ts-3xeager15-long20 ts-graph60-micro10 ts-3xgraph20 ts-graph30-eager30" bash "$ACC/suite.sh" ;;
  2) OUT=$OUT/mps MPS=1 CASES="mps-graph30-eager20-matmul10 mps-graph40-holder" bash "$ACC/suite.sh"
     OUT=$OUT/repeat CASES="alone-long30 alone-xlong30 ts-4xgraph15 ts-micro20-long30 ts-6mixed-b" \
       bash "$ACC/suite.sh" ;;
esac

#!/bin/bash
# Issue 21, run 4 (docs/validation.md, "Run 4"): the suite on branch i21d's build (the probe
# believes a kernel span only wholly inside one traced stretch) with main's NVML change merged.
# Its cases ran on the H100 in two calls, each with its exact command in docs/validation.md
# ("Run 4", "On the H100 with the rule"). To run it, put release builds of tessera and the
# probe, and lab/device/accuracy/ with lab/device/archive/accuracy/ copied into one
# folder accuracy/, in a git-ignored `.dev-i21d/`
# of the checkout the device receives; then, from its root, with carry [".dev-i21d"]:
#   OUT=$OUT bash .dev-i21d/accuracy/run4.sh   # ~470 s (the two calls: 171 s and 255 s)
#   python3 lab/device/accuracy/suite_table.py $OUT/suite.jsonl
#   python3 lab/device/accuracy/suite_table.py $OUT/mps/suite.jsonl
# Writes $OUT/card.txt and, per suite run ($OUT, $OUT/mps), suite.jsonl, calib.txt, raw.tgz.
# Data: lab/data/accuracy-h100-2026-11-26-run4*.
set -u
HERE=$(cd "$(dirname "$0")" && pwd)
# suite.sh is maintained harness (lab/device/accuracy/); beside this script when both
# folders were carried as one.
ACC=$HERE; [ -e "$ACC/suite.sh" ] || ACC=$(cd "$HERE/../../accuracy" && pwd)
DEV=$(dirname "$HERE")
: "${OUT:?}"
mkdir -p "$OUT"
nvidia-smi --query-gpu=name,driver_version,compute_mode,mig.mode.current --format=csv > "$OUT/card.txt" 2>&1
cat "$OUT/card.txt"
rm -f /tmp/suite-calib.json
export TESSERA=$DEV/tessera PROBE=$DEV/libtessera_probe.so OUT
export KINDS="infer-graph infer-eager matmul micro long xlong" DUR=16 LEAD=12 ALONE_DUR=24
# Alone (NVML's reading, now every sample since the last read), then the time-sliced cases of
# run 3 with the held-back ones (ts-3xeager15-long20, ts-graph60-micro10, ts-3xgraph20,
# ts-graph30-eager30, ts-6mixed-b) and the MPS case whose graph tenant read +9.2.
CASES="alone-long30 alone-xlong30 alone-graph40 alone-micro20 ts-4xgraph15 ts-micro20-long30 \
ts-3xeager15-long20 ts-graph60-micro10 ts-3xgraph20 ts-graph30-eager30 ts-6mixed-b" \
  bash "$ACC/suite.sh"
OUT=$OUT/mps MPS=1 CASES="mps-graph30-eager20-matmul10" bash "$ACC/suite.sh"

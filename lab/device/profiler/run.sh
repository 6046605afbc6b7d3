#!/bin/bash
# A tenant that starts torch.profiler for 10 s mid-run beside a co-tenant (time-sliced), and
# the probe's cost to a launch-bound tenant while shared, in one device call (profiler.py says
# what each phase does). From the repository root, with release builds carried:
#   cargo build --release -p tessera -p tessera-probe      # here, before the call
#   OUT=$OUT bash lab/device/profiler/run.sh               # there (about 4.5 minutes)
#   PHASES=overhead OUT=$OUT bash lab/device/profiler/run.sh   # the probe's cost alone (2.5 min)
#   carry: target/release/tessera target/release/libtessera_probe.so
# Env: PHASES (calib,profiler,overhead; default all), each phase with the calibration it needs;
# OVERHEAD_ROUNDS (6), OVERHEAD_TURN_S (8), OVERHEAD_TRACED (1: a third turn a round, the probe
# tracing every launch). The overhead phase takes ROUNDS x 2 (3 traced) x TURN_S s, plus about
# 20 s to start and warm its tenants; all phases together must fit the driver's 470 s below.
# Writes to $OUT: results.jsonl, summary.txt, logs.tgz. Never changes GPU settings; starts no
# MPS daemon.
set -u
ROOT=$(cd "$(dirname "$0")/../../.." && pwd)
: "${OUT:?}"
mkdir -p "$OUT" && OUT=$(cd "$OUT" && pwd)
TESSERA=${TESSERA:-$ROOT/target/release/tessera}
PROBE=${PROBE:-$ROOT/target/release/libtessera_probe.so}
for f in "$TESSERA" "$PROBE"; do
  [ -e "$f" ] || { echo "missing $f: build and carry it (see the head of this script)"; exit 2; }
done
if [ -z "${COMMIT:-}" ]; then
  COMMIT=$(git -C "$ROOT" rev-parse HEAD 2>/dev/null || echo unknown)
fi
export PYTHONUNBUFFERED=1
python3 -c "import torch; print('torch', torch.__version__, 'gpus', torch.cuda.device_count())" 2>&1 | tail -1
timeout -k 10 470 python3 "$ROOT/lab/device/profiler/profiler.py" drive --out "$OUT" \
  --tessera "$TESSERA" --probe "$PROBE" --commit "$COMMIT" 2> "$OUT/driver.log"
echo "driver exit $?"
# A driver cut off by the timeout leaves its tenants (each in its own session): end them by pid.
while read -r pid; do kill -- -"$pid" 2>/dev/null; done < /tmp/tessera-profiler-run/pids 2>/dev/null
tail -5 "$OUT/driver.log"
ls -la "$OUT"

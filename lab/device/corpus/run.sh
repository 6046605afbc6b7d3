#!/bin/bash
# Issue 32's corpus of real-framework tenants (docs/validation.md, "The corpus"), in one call.
# From the repository root, with release builds of tessera and the probe carried:
#   cargo build --release -p tessera -p tessera-probe      # here, before the call
#   OUT=$OUT BUDGET=515 SEED=20261127 bash lab/device/corpus/run.sh   # runs 2-4 (2, 3: BUDGET=480); run 1: BUDGET=400 SEED=3217; runs 5-8: SEED=20261127/28; runs 9-11: SEED=20261129/30/31
#   carry: target/release/tessera target/release/libtessera_probe.so
# BUDGET: seconds for everything (calibration, the time-sliced draws, the MPS draws); the
# script returns ~15 s after it. SEED: the driver's seed, fixed before the run (written in the
# data with the commit). TESSERA / PROBE override the builds' paths.
# Issue 42: CLASSES=light|heavy|light,heavy (default light, runs 1-11's corpus), MODES=ts|mps|ts,mps,
# ALONE=1 (each heavy kind alone with records on, first), RECORD_LOG=1 (every tenant's kernel
# records into records.tar.xz, in 15 MiB parts past that, packed after the budget: leave ~30 s), GPU=N (this GPU only, with its own tessera port, probe socket,
# folders and MPS daemon: several runs side by side on one host, each with its own OUT).
# Writes to $OUT: corpus.jsonl (header with seed, commit, plan; calibration; every draw with
# every read; footer with failures and draws not run), logs.tgz, summary.txt (analyze.py).
# Never changes GPU settings; MPS runs with private pipe/log folders under /tmp and is quit.
set -u
ROOT=$(cd "$(dirname "$0")/../../.." && pwd)
: "${OUT:?}"
mkdir -p "$OUT" && OUT=$(cd "$OUT" && pwd)
TESSERA=${TESSERA:-$ROOT/target/release/tessera}
PROBE=${PROBE:-$ROOT/target/release/libtessera_probe.so}
for f in "$TESSERA" "$PROBE"; do
  [ -e "$f" ] || { echo "missing $f: build and carry it (see the head of this script)"; exit 2; }
done
# COMMIT: given where the copy on the device has no git history.
if [ -z "${COMMIT:-}" ]; then
  COMMIT=$(git -C "$ROOT" rev-parse HEAD 2>/dev/null || echo unknown)
  git -C "$ROOT" diff --quiet HEAD 2>/dev/null || COMMIT="$COMMIT+dirty"
fi
CUPTI=$(find /usr /opt -name 'libcupti.so*' 2>/dev/null | sort | tail -1)
# NVLink multicast stays off for the DDP tenant's NCCL (the device machines' rule).
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
SUFFIX=${GPU:+-g$GPU}
export TESSERA_PROBE_CUPTI=$CUPTI TESSERA_PROBE_SOCKET=/tmp/corpus-probe$SUFFIX.sock PYTHONUNBUFFERED=1
rm -f "$TESSERA_PROBE_SOCKET"
python3 -c "import torch, transformers, timm, sentence_transformers; print('torch', torch.__version__, 'transformers', transformers.__version__, 'timm', timm.__version__, 'st', sentence_transformers.__version__, 'gpus', torch.cuda.device_count())" 2>&1 | tail -1
timeout -k 10 $(( ${BUDGET:-500} + 40 )) python3 "$ROOT/lab/device/corpus/driver.py" --out "$OUT" \
  --budget "${BUDGET:-500}" --seed "${SEED:-3217}" --tessera "$TESSERA" --probe "$PROBE" --commit "$COMMIT" \
  --classes "${CLASSES:-light}" --modes "${MODES:-ts,mps}" ${GPU:+--gpu "$GPU"} ${ALONE:+--alone} \
  ${RECORD_LOG:+--record-log} 2> "$OUT/driver.log"
echo "driver exit $?"
# Packed outside the driver's timeout, on every core (run 17's, packed inside it, was cut short).
if [ -n "${RECORD_LOG:-}" ] && [ -d "/tmp/corpus-run$SUFFIX/rec" ]; then
  tar cf - -C "/tmp/corpus-run$SUFFIX" rec | xz -T0 -6 > "$OUT/records.tar.xz"
  # No file over 16 MiB comes back from the device machine (run 20's did not): parts of 15 MiB
  # do; `cat records.tar.xz.part-* > records.tar.xz` joins them.
  if [ "$(stat -c %s "$OUT/records.tar.xz")" -gt $((15 << 20)) ]; then
    split -b 15M -d "$OUT/records.tar.xz" "$OUT/records.tar.xz.part-" && rm "$OUT/records.tar.xz"
  fi
fi
# A driver cut off by the timeout leaves its tenants (each in its own session): end them by pid.
while read -r pid; do kill -- -"$pid" 2>/dev/null; done < /tmp/corpus-run$SUFFIX/pids 2>/dev/null
# Whatever the driver left, MPS must not outlive the call.
echo quit | CUDA_MPS_PIPE_DIRECTORY=/tmp/corpus-mps-pipe$SUFFIX nvidia-cuda-mps-control >/dev/null 2>&1
tail -5 "$OUT/driver.log"
python3 "$ROOT/lab/device/corpus/analyze.py" "$OUT/corpus.jsonl" | tee "$OUT/summary.txt"
ls -la "$OUT"

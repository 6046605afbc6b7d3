#!/usr/bin/env bash
# Issue 31's device runs on a host with 2 or more GPUs (docs/reliability.md, "Several GPUs").
# Never changes GPU settings; NVLink multicast stays off.
#   bash lab/device/multigpu/run.sh soak   # 10 min: fixed and unfixed builds, bisect hammers
#   bash lab/device/multigpu/run.sh ddp    # DDP + stray contexts + a time-sliced peer
# Binaries come from BIN_DIR (default .devbin): tessera (this tree, release), tessera-base (the
# unfixed build), nvml_hammer (examples/nvml_hammer.rs), libtessera_probe.so.
set -u
cd "$(dirname "$0")"
BIN_DIR=${BIN_DIR:-../../../.devbin}
OUT=${OUT:-/tmp/multigpu}
mkdir -p "$OUT"
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=index,name,driver_version,memory.total --format=csv > "$OUT/gpus.csv"
case "${1:-soak}" in
  soak)
    CUPTI=$(find /usr /opt -name 'libcupti.so*' 2>/dev/null | sort | tail -1)
    python3 soak.py --fixed "$BIN_DIR/tessera" --base "$BIN_DIR/tessera-base" \
      --hammer "$BIN_DIR/nvml_hammer" --probe "$(realpath "$BIN_DIR/libtessera_probe.so")" --cupti "$CUPTI" \
      --seconds "${SECONDS_SOAK:-600}" --out "$OUT/soak" ;;
  ddp)
    python3 ddp_check.py --tessera "$BIN_DIR/tessera" --seconds "${SECONDS_DDP:-45}" --out "$OUT/ddp" ;;
  *) echo "usage: run.sh soak|ddp" >&2; exit 2 ;;
esac

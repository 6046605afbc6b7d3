#!/bin/bash
# A lone 50 % matmul process, with and without the CUDA probe: per-op CUDA-event times beside
# tessera's probe busy ratio (see anatomy.py).
#   TESSERA=... PROBE=... OUT=dir bash anatomy.sh
set -u
# The measurements read per-process and other full-detail families.
export TESSERA_METRICS_DETAIL=full
cd "$(dirname "$0")"
ACC=.; [ -e tessera_watch.py ] || ACC=../../accuracy   # maintained harness
OUT=${OUT:-./out}; mkdir -p "$OUT"
CUPTI=$(find /usr /opt -name 'libcupti.so*' 2>/dev/null | sort | tail -1)
export TESSERA_PROBE_CUPTI=$CUPTI
SOCK=/tmp/tessera-anatomy.sock
"$TESSERA" --web.listen-address=127.0.0.1:9951 --sample.interval=1s --nvml.process-interval=1s \
  --kubelet.enabled=false --kube.enabled=false --web.enable-debug=true --probe.socket=$SOCK > "$OUT/anatomy-tessera.log" 2>&1 & T=$!
sleep 2
for round in 1 2; do
  start=$(python3 -c 'import time;print(time.time()+10)')
  TESSERA_PROBE_SOCKET=$SOCK CUDA_INJECTION64_PATH=$PROBE python3 anatomy.py 0.5 "$start" 20 /tmp/anat-probe.json &
  A=$!
  python3 $ACC/tessera_watch.py http://127.0.0.1:9951 "$start" 20 /tmp/anat-watch.json 6 &
  W=$!
  wait $A $W
  start=$(python3 -c 'import time;print(time.time()+10)')
  python3 anatomy.py 0.5 "$start" 20 /tmp/anat-plain.json
  python3 - <<'PY' | tee -a "$OUT/anatomy.jsonl"
import json
p, w, q = (json.load(open(f"/tmp/anat-{n}.json")) for n in ("probe", "watch", "plain"))
pid = str(p["pid"])
busy, kps = w["busy"].get(pid), w.get("kernels_per_s", {}).get(pid)
print(json.dumps({"with_probe": p, "plain": q, "probe_busy": busy, "probe_kernels_per_s": kps,
  "probe_ms_per_kernel": round(busy * 1000 / kps, 4) if busy and kps else None,
  "ops_per_s": round(p["ops"] / p["wall_s"], 1)}))
PY
done
kill $T; wait $T 2>/dev/null
exit 0

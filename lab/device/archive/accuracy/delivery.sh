#!/bin/bash
# How promptly and evenly the CUDA probe's records reach tessera, per CUPTI flush setting:
# workloads of known shape (workload.py) with the probe reporting to a frame logger (frames.py).
#   PROBE=... OUT=dir CONFIGS="default buf64k forced" MODES="cont duty50 longk" bash delivery.sh
set -u
cd "$(dirname "$0")"
OUT=${OUT:-./out}; mkdir -p "$OUT"
export TESSERA_PROBE_CUPTI=$(find /usr /opt -name 'libcupti.so*' 2>/dev/null | sort | tail -1)
SOCK=/tmp/tessera-delivery.sock DUR=${DUR:-16}
for cfg in ${CONFIGS:-default buf64k forced}; do
  for mode in ${MODES:-cont duty50 longk}; do
    python3 frames.py $SOCK $((DUR + 8)) /tmp/frames.jsonl & L=$!
    sleep 1
    case $cfg in
      buf64k) extra=(TESSERA_PROBE_BUFFER_BYTES=65536) ;;
      forced) extra=(TESSERA_PROBE_FLUSH=forced) ;;
      *) extra=() ;;
    esac
    env "${extra[@]}" TESSERA_PROBE_SOCKET=$SOCK CUDA_INJECTION64_PATH=$PROBE python3 workload.py $mode $DUR /tmp/work.json
    wait $L
    python3 - "$cfg" <<'PY' | tee -a "$OUT/delivery.jsonl"
import json, sys, statistics as st
w = json.load(open("/tmp/work.json"))
rows = [json.loads(l) for l in open("/tmp/frames.jsonl")]
rows = [r for r in rows if r["pid"] == w["pid"] and w["t0"] + 3 <= r["t"] <= w["t0"] + w["wall_s"]]
def q(v, p): return round(sorted(v)[min(len(v) - 1, int(p * len(v)))], 1) if v else None
ratios = []
for a, b in zip(rows, rows[2:]):
    if b["t"] > a["t"]: ratios.append((b["busy_ns"] - a["busy_ns"]) / 1e9 / (b["t"] - a["t"]))
lag = [r["now_ns"] / 1e6 - r["newest_covered"] for r in rows if r.get("newest_covered")]
whole = (rows[-1]["busy_ns"] - rows[0]["busy_ns"]) / 1e9 / (rows[-1]["t"] - rows[0]["t"]) if len(rows) > 1 else None
print(json.dumps({"config": sys.argv[1], "mode": w["mode"], "events_share": round(w["events_share"], 4),
  "probe_share_whole": round(whole, 4) if whole is not None else None, "frames": len(rows),
  "ratio_2s": {"mean": round(st.mean(ratios), 4), "min": round(min(ratios), 4), "max": round(max(ratios), 4)} if ratios else None,
  "newest_covered_lag_ms": {"p50": q(lag, .5), "p90": q(lag, .9), "max": q(lag, 1)},
  "kernels_per_s_events": round(w["kernels"] / w["wall_s"], 1),
  "kernels_per_s_probe": round((rows[-1]["kernels"] - rows[0]["kernels"]) / (rows[-1]["t"] - rows[0]["t"]), 1) if len(rows) > 1 else None,
  "incomplete": rows[-1].get("incomplete") if rows else None, "dropped": rows[-1]["dropped"] if rows else None}))
PY
  done
done
exit 0

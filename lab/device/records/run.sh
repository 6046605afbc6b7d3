#!/bin/bash
# Records only where shared, on one GPU (docs/validation.md, "Records only where shared"):
#  (a) a launch-bound loop alone, plain / with the probe loaded (tessera listening, so the
#      probe attaches, but the process is alone and records stay off) / with records always on
#      (the earlier behaviour, as a control that the loop shows the cost), interleaved rounds;
#  (b) tenant A alone, then tenant B starts: how long from B's first kernel until tessera
#      publishes both shares from the probes' timelines.
# Never changes GPU settings.
#   TESSERA=... PROBE=... OUT=dir ROUNDS=4 SECS=10 PAIRS=3 bash run.sh
set -u
# The measurements read per-process and other full-detail families.
export TESSERA_METRICS_DETAIL=full
cd "$(dirname "$0")"
OUT=${OUT:-./out}; mkdir -p "$OUT"
export PYTHONUNBUFFERED=1
CUPTI=$(find /usr /opt -name 'libcupti.so*' 2>/dev/null | sort | tail -1)
SOCK=/tmp/tessera-records.sock
echo "cupti: $CUPTI" | tee "$OUT/results.jsonl"
env -u TESSERA_PROBE_SOCKET "$TESSERA" --web.listen-address=127.0.0.1:9951 --sample.interval=1s \
  --nvml.process-interval=1s --kubelet.enabled=false --kube.enabled=false --web.enable-debug=true \
  --probe.socket=$SOCK > "$OUT/tessera.log" 2>&1 & T=$!
sleep 2
probe_env=(TESSERA_PROBE_CUPTI=$CUPTI TESSERA_PROBE_SOCKET=$SOCK CUDA_INJECTION64_PATH=$PROBE)
for i in $(seq "${ROUNDS:-4}"); do
  for v in plain probe always; do
    log=/tmp/toggles-$v-$i.txt; rm -f "$log"
    case $v in
      plain) line=$(PIN_MAIN=5 python3 launch_loop.py plain "${SECS:-10}") ;;
      probe) line=$(env "${probe_env[@]}" TESSERA_PROBE_TRACE_LOG=$log PIN_MAIN=5 python3 launch_loop.py probe "${SECS:-10}") ;;
      always) line=$(env "${probe_env[@]}" TESSERA_PROBE_TRACE_LOG=$log TESSERA_PROBE_RECORDS=always PIN_MAIN=5 python3 launch_loop.py always "${SECS:-10}") ;;
    esac
    on=0; [ -f "$log" ] && on=$(grep -c '^on' "$log")
    echo "${line%\}}, \"round\": $i, \"records_turned_on\": $on}" | tee -a "$OUT/results.jsonl"
  done
done
for i in $(seq "${PAIRS:-3}"); do
  rm -f /tmp/a-first /tmp/b-first /tmp/toggles-a-$i.txt /tmp/toggles-b-$i.txt
  env "${probe_env[@]}" TESSERA_PROBE_TRACE_LOG=/tmp/toggles-a-$i.txt python3 tenant.py 0.4 45 /tmp/a-first & A=$!
  sleep 15
  env "${probe_env[@]}" TESSERA_PROBE_TRACE_LOG=/tmp/toggles-b-$i.txt python3 tenant.py 0.25 28 /tmp/b-first & B=$!
  python3 watch_pair.py http://127.0.0.1:9951 $A $B /tmp/b-first 26 "$OUT/pair-$i.json" > /dev/null
  python3 - "$OUT/pair-$i.json" $i <<'PY' | tee -a "$OUT/results.jsonl"
import json, sys
d = json.load(open(sys.argv[1])); d.pop("series", None); d["pair"] = int(sys.argv[2]); print(json.dumps(d))
PY
  wait $A $B
  for w in a b; do echo "pair $i tenant $w:"; cat /tmp/toggles-$w-$i.txt 2>/dev/null; done >> "$OUT/toggles.txt"
done
kill $T; wait $T 2>/dev/null
tail -50 "$OUT/tessera.log" > "$OUT/tessera-tail.log"; rm -f "$OUT/tessera.log"
exit 0

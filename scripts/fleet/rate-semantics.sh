#!/usr/bin/env bash
# Where Prometheus's and VictoriaMetrics's increase()/rate() part on the same samples, shown on
# three counters written into both engines (promtool blocks; /api/v1/import):
#   one             a single sample in the window, nothing before;
#   before_and_one  a sample 65 min before the instant and one inside the last hour;
#   two             two samples 15 s apart inside the window.
# Prints each engine's answer to increase(a_total[1h]) and rate(a_total[1h]) * 3600 at one
# instant (docs/scale.md, "vmalert and Prometheus on the same samples"). Needs prometheus,
# promtool, victoria-metrics, curl, python3. Listens on 127.0.0.1 only; stops what it starts.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
. scripts/lib/harness.sh
tmp=$(mktemp -d "${TMPDIR:-/tmp}/tessera-rate.XXXXXX")
pids=()
trap 'for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; wait 2>/dev/null; rm -rf "$tmp"' EXIT
t=$(($(date +%s) / 60 * 60 - 1800))
{
  echo "# TYPE a counter"
  echo "a_total{s=\"one\"} 5 $t"
  echo "a_total{s=\"before_and_one\"} 3 $((t - 3900))"
  echo "a_total{s=\"before_and_one\"} 8 $t"
  echo "a_total{s=\"two\"} 5 $t"
  echo "a_total{s=\"two\"} 8 $((t + 15))"
  echo "# EOF"
} >"$tmp/in.om"
promtool tsdb create-blocks-from openmetrics "$tmp/in.om" "$tmp/prom" >/dev/null
python3 - "$t" >"$tmp/in.jsonl" <<'EOF'
import json, sys
t = int(sys.argv[1])
for s, vals in (("one", [(t, 5)]), ("before_and_one", [(t - 3900, 3), (t, 8)]), ("two", [(t, 5), (t + 15, 8)])):
    print(json.dumps({"metric": {"__name__": "a_total", "s": s}, "values": [v for _, v in vals],
                      "timestamps": [ts * 1000 for ts, _ in vals]}))
EOF
vm=$(free_port) prom=$(free_port)
victoria-metrics -storageDataPath="$tmp/vm" -httpListenAddr="127.0.0.1:$vm" -search.latencyOffset=0s \
  -search.disableCache -loggerLevel=ERROR >"$tmp/vm.log" 2>&1 &
pids+=("$!")
prometheus --config.file=/dev/null --storage.tsdb.path="$tmp/prom" --web.listen-address="127.0.0.1:$prom" \
  --storage.tsdb.retention.time=30d --log.level=error >"$tmp/prom.log" 2>&1 &
pids+=("$!")
wait_http "http://127.0.0.1:$vm/health" 30
wait_http "http://127.0.0.1:$prom/-/ready" 30
curl -fsS --data-binary @"$tmp/in.jsonl" "http://127.0.0.1:$vm/api/v1/import"
curl -fsS "http://127.0.0.1:$vm/internal/force_flush" >/dev/null
sleep 2
at=$((t + 60))
echo "instant: window's end 60 s after the counters' samples at t=$t"
for e in 'increase(a_total[1h])' 'rate(a_total[1h]) * 3600'; do
  for engine in "prometheus $prom" "victoriametrics $vm"; do
    set -- $engine
    printf '%-16s %-28s %s\n' "$1" "$e" "$(curl -fsS "http://127.0.0.1:$2/api/v1/query" --data-urlencode "query=$e" \
      --data-urlencode "time=$at" | python3 -c 'import json,sys; print(sorted((r["metric"]["s"], round(float(r["value"][1]), 3)) for r in json.load(sys.stdin)["data"]["result"]))')"
  done
done

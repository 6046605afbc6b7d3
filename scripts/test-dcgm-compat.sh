#!/usr/bin/env bash
# What dcgm-exporter's consumers ask, asked of tessera: `--demo --metrics.dcgm-compat` scraped by a
# real Prometheus, then NVIDIA's dashboard panels, OpenCost's GPU queries and an autoscaler's
# per-pod query evaluated as those tools send them (tests/dcgm/consumer-queries.yaml), checked
# against tessera's own families (tests/dcgm/check_consumers.py).
#
#   TESSERA_BIN=target/release/tessera scripts/test-dcgm-compat.sh
#
# Two scrape jobs, as a Kubernetes scrape of an exporter pod has them: both carry the exporter's
# own `namespace`, `pod` and `container` as target labels.
#   dcgm-honor  /metrics of the main listener, honor_labels: true (the series keep their pod labels)
#   dcgm-plain  /metrics of --web.dcgm-listen-address, honor_labels: false (Prometheus renames the
#               series' pod labels to exported_namespace, exported_pod, exported_container)
# A second demo runs its scenario clock ten times faster (TESSERA_DEMO_TIME_SCALE=0.1: the 120 s loop
# in 12 s), scraped by a second Prometheus (honor_labels: true), for the checks over the whole loop
# (tests/dcgm/check_loop.py): the sums in every scrape, and OpenCost's 5-minute average for pods
# that alternate busy and idle.
# Listens on 127.0.0.1 only; every process it starts is stopped on exit; bounded by
# TESSERA_TEST_TIMEOUT seconds (default 300). Last line: "N passed, M failed".
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."
ROOT=$PWD
TESSERA_BIN=${TESSERA_BIN:-target/release/tessera}
LIMIT=${TESSERA_TEST_TIMEOUT:-300}
# Scrapes to wait for: the checks average over the last 10 s.
SCRAPES=${DCGM_TEST_SCRAPES:-12}
# Scrapes of the fast demo with its pods known: three 12 s loops.
LOOP_SCRAPES=${DCGM_TEST_LOOP_SCRAPES:-36}

passed=0
failed=0
pids=()
tmp=$(mktemp -d "${TMPDIR:-/tmp}/tessera-dcgm-test.XXXXXX")
cleanup() {
  local p
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
  rm -rf "$tmp"
}
trap cleanup EXIT
trap 'echo "interrupted"; echo "$passed passed, $((failed + 1)) failed"; exit 130' INT TERM

# shellcheck source=lib/harness.sh
. scripts/lib/harness.sh
start_watchdog test-dcgm-compat.sh "$LIMIT"
pids+=("$watchdog_pid")

finish() {
  echo
  echo "$passed passed, $failed failed"
  ((failed == 0))
  exit
}

section "dcgm-exporter's consumers against tessera --demo --metrics.dcgm-compat"
for tool in prometheus python3 curl; do
  command -v "$tool" >/dev/null 2>&1 || { fail "missing tool: $tool"; finish; }
done
python3 -c 'import yaml' 2>/dev/null || { fail "missing python3-yaml"; finish; }
[[ -x $TESSERA_BIN ]] || { fail "no $TESSERA_BIN (cargo build --release -p tessera)"; finish; }

main_port=$(free_port)
dcgm_port=$(free_port)
prom_port=$(free_port)
"$TESSERA_BIN" --demo --metrics.dcgm-compat --metrics.detail=full --web.listen-address="127.0.0.1:$main_port" \
  --web.dcgm-listen-address="127.0.0.1:$dcgm_port" >"$tmp/exporter.log" 2>&1 &
exp_pid=$!
pids+=("$exp_pid")
loop_port=$(free_port)
loop_prom_port=$(free_port)
TESSERA_DEMO_TIME_SCALE=0.1 "$TESSERA_BIN" --demo --metrics.dcgm-compat --metrics.detail=full \
  --web.listen-address="127.0.0.1:$loop_port" >"$tmp/exporter-loop.log" 2>&1 &
pids+=("$!")
mkdir -p "$tmp/loop"
printf '%s\n' 'global:' '  scrape_interval: 1s' '  scrape_timeout: 1s' 'scrape_configs:' \
  '  - job_name: dcgm-loop' '    honor_labels: true' '    static_configs:' \
  "      - targets: [\"127.0.0.1:$loop_port\"]" >"$tmp/loop/prometheus.yml"
prometheus --config.file="$tmp/loop/prometheus.yml" --storage.tsdb.path="$tmp/loop/data" \
  --web.listen-address="127.0.0.1:$loop_prom_port" --log.level=warn >"$tmp/prometheus-loop.log" 2>&1 &
pids+=("$!")
if wait_http "http://127.0.0.1:$dcgm_port/metrics" 30 "$exp_pid"; then
  pass "tessera --demo --metrics.dcgm-compat: /metrics on :$main_port, DCGM families alone on :$dcgm_port"
else
  fail "tessera --demo --metrics.dcgm-compat did not serve"
  tail -n 20 "$tmp/exporter.log" | sed 's/^/      /'
  finish
fi

# The exporter pod's own labels, as Kubernetes service discovery attaches them to the target.
target_labels='{namespace: gpu-monitoring, pod: tessera-7x2kq, container: tessera}'
cat >"$tmp/prometheus.yml" <<EOF
global:
  scrape_interval: 1s
  scrape_timeout: 1s
scrape_configs:
  - job_name: dcgm-honor
    honor_labels: true
    static_configs:
      - targets: ["127.0.0.1:$main_port"]
        labels: $target_labels
  - job_name: dcgm-plain
    static_configs:
      - targets: ["127.0.0.1:$dcgm_port"]
        labels: $target_labels
EOF
prometheus --config.file="$tmp/prometheus.yml" --storage.tsdb.path="$tmp/data" \
  --web.listen-address="127.0.0.1:$prom_port" --log.level=warn >"$tmp/prometheus.log" 2>&1 &
prom_pid=$!
pids+=("$prom_pid")
if ! wait_http "http://127.0.0.1:$prom_port/-/ready" 30 "$prom_pid"; then
  fail "Prometheus did not become ready"
  tail -n 20 "$tmp/prometheus.log" | sed 's/^/      /'
  finish
fi

# Bounds, not waits: each loop ends as soon as its scrapes are in.
n=0
for ((i = 0; i < 120; i++)); do
  n=$(prom_value 'min(count_over_time(up[1m]) * (up == 1))')
  if [[ -n $n && ${n%.*} -ge $SCRAPES ]]; then break; fi
  sleep 1
done
if [[ -z $n || ${n%.*} -lt $SCRAPES ]]; then
  fail "Prometheus did not scrape both jobs $SCRAPES times (got ${n:-none})"
  curl -fsS --max-time 5 "http://127.0.0.1:$prom_port/api/v1/targets" | head -c 1500 | sed 's/^/      /' || true
  finish
fi
pass "Prometheus scraped both jobs (honor_labels true and false) ${n%.*} times"

log=$tmp/check_consumers.log
python3 tests/dcgm/check_consumers.py --prom "http://127.0.0.1:$prom_port" \
  --queries tests/dcgm/consumer-queries.yaml --metrics-doc docs/metrics.md \
  --honor-job dcgm-honor --plain-job dcgm-plain --exporter-pod gpu-monitoring/tessera-7x2kq \
  >"$log" 2>&1 || true
tally() { # $1: a checker's log, $2: its name
  grep -Ev '^ok ' "$1" || true
  local line p f
  line=$(grep -E "^$2: [0-9]+ passed, [0-9]+ failed\$" "$1" | tail -n 1 || true)
  if [[ -z $line ]]; then
    fail "$2.py did not finish"
    tail -n 20 "$1" | sed 's/^/      /'
  else
    p=$(sed -E 's/.*: ([0-9]+) passed.*/\1/' <<<"$line")
    f=$(sed -E 's/.* ([0-9]+) failed/\1/' <<<"$line")
    passed=$((passed + p))
    failed=$((failed + f))
  fi
}
tally "$log" check_consumers

section "the whole demo loop at ten times its speed (TESSERA_DEMO_TIME_SCALE=0.1)"
n=0
count_q='count_over_time(DCGM_FI_DEV_FB_USED{pod=~"ranker-a-.*"}[5m])'
for ((i = 0; i < 120; i++)); do
  n=$(curl -fsS --max-time 5 "http://127.0.0.1:$loop_prom_port/api/v1/query" --data-urlencode "query=$count_q" 2>/dev/null |
    python3 -c 'import json,sys; r=json.load(sys.stdin)["data"]["result"]; print(int(float(r[0]["value"][1])) if r else 0)' 2>/dev/null ||
    echo 0)
  if ((n >= LOOP_SCRAPES)); then break; fi
  sleep 1
done
if ((n < LOOP_SCRAPES)); then
  fail "the fast demo was not scraped $LOOP_SCRAPES times with its pods known (got $n)"
  tail -n 5 "$tmp/exporter-loop.log" "$tmp/prometheus-loop.log" | sed 's/^/      /'
  finish
fi
pass "Prometheus scraped the fast demo $n times with its pods known (~$((n / 12)) loops of 12 s)"
log=$tmp/check_loop.log
python3 tests/dcgm/check_loop.py --prom "http://127.0.0.1:$loop_prom_port" \
  --queries tests/dcgm/consumer-queries.yaml --scenario crates/fake-nvml/scenarios/demo.yaml \
  --job dcgm-loop >"$log" 2>&1 || true
tally "$log" check_loop
grep -E "^ok " "$log" | sed "s/^/  /" || true
finish

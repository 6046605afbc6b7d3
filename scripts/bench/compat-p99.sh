#!/usr/bin/env bash
# Scrape latency with --metrics.dcgm-compat off and on, alternated, as Prometheus scrapes:
# one client, sequential, gzip. Each round starts a fresh node per setting, so a slow moment of
# the machine lands on both settings alike; the table gives every round's p99 and the medians.
#
#   cargo build --release -p fake-nvml && cargo build --release --bin tessera --example dense_node
#   ROUNDS=7 SCRAPES=3000 NODES="demo dense" scripts/bench/compat-p99.sh
#
# BIN_DIR (default target/release) holds tessera, libfake_nvml.so and examples/dense_node.
# Prints a markdown table; timings are printed, never asserted.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
BIN_DIR=${BIN_DIR:-target/release}
ROUNDS=${ROUNDS:-7}
SCRAPES=${SCRAPES:-3000}
NODES=${NODES:-demo dense}
PROBE="python3 scripts/bench/probe.py"
TMP=$(mktemp -d "${TMPDIR:-/tmp}/tessera-p99.XXXXXX")
RUNNER=""
cleanup() {
  [ -n "$RUNNER" ] && kill "$RUNNER" 2>/dev/null || true
  rm -rf "$TMP"
}
trap cleanup EXIT

start() {
  local node=$1 compat=$2 port
  port=$($PROBE port)
  URL=http://127.0.0.1:$port/metrics
  if [ "$compat" = on ]; then export TESSERA_METRICS_DCGM_COMPAT=true; else unset TESSERA_METRICS_DCGM_COMPAT; fi
  case $node in
    demo)
      "$BIN_DIR/tessera" --demo --web.listen-address="127.0.0.1:$port" >"$TMP/node.log" 2>&1 &
      RUNNER=$!
      TPID=$RUNNER
      ;;
    dense)
      "$BIN_DIR/examples/dense_node" --tessera "$BIN_DIR/tessera" --listen "127.0.0.1:$port" \
        >"$TMP/node.out" 2>"$TMP/node.log" &
      RUNNER=$!
      TPID=""
      for _ in $(seq 1 600); do
        TPID=$(sed -nE 's/^tessera pid=([0-9]+) .*/\1/p' "$TMP/node.out")
        [ -n "$TPID" ] && break
        sleep 0.1
      done
      ;;
  esac
  [ -n "$TPID" ] && $PROBE wait "$URL" 120 >/dev/null || { tail -20 "$TMP/node.log" >&2; exit 1; }
  sleep 3 # a few sample cycles, so every family is in the exposition
}

stop() {
  kill -TERM "$RUNNER" 2>/dev/null || true
  wait "$RUNNER" 2>/dev/null || true
  RUNNER=""
}

for node in $NODES; do
  for ((r = 1; r <= ROUNDS; r++)); do
    # Alternate which setting goes first, so neither always runs on a freshly warmed machine.
    order="off on"
    ((r % 2 == 0)) && order="on off"
    for compat in $order; do
      start "$node" "$compat"
      line=$(python3 scripts/bench/scrape-cpu.py "$URL" "$TPID" "$SCRAPES" gzip "$TMP/lat-$node-$compat")
      stop
      echo "$node $compat $r $line" | tee -a "$TMP/rows" >&2
    done
  done
done

python3 - "$TMP/rows" "$TMP" <<'PY'
import statistics, sys
rows = {}
def pooled(node, compat):
    lat = sorted(float(x) for x in open(f"{sys.argv[2]}/lat-{node}-{compat}"))
    return [lat[min(len(lat) - 1, int(q * len(lat)))] for q in (0.5, 0.99, 0.999)]
for line in open(sys.argv[1]):
    node, compat, _round, *kv = line.split()
    d = dict(x.split("=") for x in kv)
    rows.setdefault((node, compat), []).append(d)
print("| node | compat | rounds × scrapes | p99 ms per round | p99 median of rounds | pooled p50 / p99 / p99.9 ms | pooled p99 on / off | serve CPU ms per scrape (median) | gzip bytes |")
print("|---|---|---|---|---:|---|---:|---:|---:|")
for (node, compat), ds in rows.items():
    p99s = [float(d["p99_ms"]) for d in ds]
    p50, p99, p999 = pooled(node, compat)
    ratio = p99 / pooled(node, "off")[1]
    cpu = statistics.median(float(d["serve_cpu_ms_per_scrape"]) for d in ds)
    print(f"| {node} | {compat} | {len(ds)} × {ds[0]['scrapes']} | {', '.join(f'{p:.2f}' for p in p99s)} "
          f"| {statistics.median(p99s):.3f} | {p50:.3f} / {p99:.3f} / {p999:.3f} | {ratio:.3f} | {cpu:.3f} | {ds[-1]['bytes']} |")
PY

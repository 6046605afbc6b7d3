#!/usr/bin/env bash
# Load: 200 concurrent scrapers for 60 s against the demo node (wrk, loopback only). Zero
# errors allowed; prints wrk's latency distribution. The scrapers ask for gzip, as Prometheus
# does; ENCODING=identity sends no Accept-Encoding.
set -euo pipefail
cd "$(dirname "$0")/.."
BIN=${TESSERA_BIN:-target/release/tessera}
CONNS=${CONNS:-200}
WRK=${WRK:-wrk}
ENCODING=${ENCODING:-gzip}
SECONDS_=${DURATION:-60}
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
"$BIN" --demo --web.listen-address=127.0.0.1:"$port" --log.level=warn 2>/dev/null &
pid=$!
trap 'kill "$pid" 2>/dev/null || true' EXIT
# shellcheck source=lib/harness.sh
. scripts/lib/harness.sh
if ! wait_http "http://127.0.0.1:$port/readyz" 60 "$pid"; then
  echo "FAIL: the demo was not ready on :$port in 60 s"
  exit 1
fi
headers=()
[ "$ENCODING" = identity ] || headers=(-H "Accept-Encoding: $ENCODING")
out=$("$WRK" -t2 -c"$CONNS" -d"${SECONDS_}s" --latency ${headers[@]+"${headers[@]}"} "http://127.0.0.1:$port/metrics")
echo "$out"
echo "RSS after: $(awk '/VmRSS/ {print $2}' /proc/$pid/status) KiB, peak $(awk '/VmHWM/ {print $2}' /proc/$pid/status) KiB"
if echo "$out" | grep -qE "Socket errors|Non-2xx"; then echo "FAIL: errors under load"; exit 1; fi
echo "1 passed, 0 failed"

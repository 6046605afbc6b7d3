# Shared by the shell test harnesses (test-prometheus.sh, test-advisor.sh, test-dcgm-compat.sh,
# fleet.sh): counting, a watchdog that bounds a whole run, ports and readiness. Source it after setting `passed=0 failed=0`.

pass() { passed=$((passed + 1)); echo "ok    $*"; }
fail() { failed=$((failed + 1)); echo "FAIL  $*"; }
section() { echo; echo "== $*"; }
# stop_pids: the processes a harness started (the array `pids`), signalled and reaped.
stop_pids() {
  local p
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
}

# start_watchdog NAME SECONDS: TERMs this shell after SECONDS; its pid is in $watchdog_pid.
# (Its sleep must not hold our stdout open, and must die with it.)
start_watchdog() {
  local name=$1 limit=$2
  (
    trap 'kill "$sleeper" 2>/dev/null; exit 0' TERM
    sleep "$limit" >/dev/null 2>&1 &
    sleeper=$!
    wait "$sleeper"
    echo "$name: over ${limit}s, giving up" >&2
    kill -TERM $$ 2>/dev/null
  ) &
  watchdog_pid=$!
}

free_port() {
  python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1]); s.close()'
}

# wait_http URL SECONDS [PID]: until URL answers 2xx (or PID has exited).
wait_http() {
  local url=$1 n=$2 pid=${3:-} i
  for ((i = 0; i < n * 4; i++)); do
    if curl -fsS --max-time 2 "$url" >/dev/null 2>&1; then return 0; fi
    if [[ -n $pid ]] && ! kill -0 "$pid" 2>/dev/null; then return 1; fi
    sleep 0.25
  done
  return 1
}

# prom_value QUERY: the first sample's value of an instant query against the Prometheus on
# $prom_port, or empty.
prom_value() {
  curl -fsS --max-time 5 "http://127.0.0.1:$prom_port/api/v1/query" --data-urlencode "query=$1" 2>/dev/null |
    python3 -c 'import json,sys; r=json.load(sys.stdin)["data"]["result"]; print(r[0]["value"][1] if r else "")' 2>/dev/null || true
}

# need_tools TOOL...: passes when every TOOL and $TESSERA_BIN are there; otherwise fails, naming
# what is missing and where it comes from, and returns 1.
need_tools() {
  local tool missing=()
  for tool in "$@"; do
    command -v "$tool" >/dev/null 2>&1 || missing+=("$tool")
  done
  [[ -x $TESSERA_BIN ]] || missing+=("$TESSERA_BIN (cargo build --release)")
  if ((${#missing[@]})); then
    fail "missing: ${missing[*]} (scripts/install-test-deps.sh)"
    return 1
  fi
  pass "tools present"
}

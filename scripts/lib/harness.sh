# Shared by the shell test harnesses (test-prometheus.sh, test-advisor.sh): counting, and a
# watchdog that bounds a whole run. Source it after setting `passed=0 failed=0`.

pass() { passed=$((passed + 1)); echo "ok    $*"; }
fail() { failed=$((failed + 1)); echo "FAIL  $*"; }
section() { echo; echo "== $*"; }

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

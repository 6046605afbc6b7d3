#!/usr/bin/env bash
# Scrape-path benchmark of the release binary, loopback only:
#   demo   `tessera --demo` (9 × H100, every sharing mode, ~600 series)
#   dense  examples/dense_node.rs: 8 × H100 × 7 × 1g.10gb MIG, 500 processes, 300 pods, served
#          by a fake kubelet and API server in the example's process (~2,500 series)
# For each: series and payload, the exporter's CPU per sample cycle over an idle window (no
# scrapes), /metrics latency under wrk at 1, 50 and 100 concurrent clients (back to back) and at
# 100 clients scraping once a second each, and RSS (VmRSS idle and after load, VmHWM).
# Prints detail tables, then one summary table against the targets last. A target named
# `<target>+compat` is the same node with --metrics.dcgm-compat (TESSERA_METRICS_DCGM_COMPAT=true):
# the compat families' cost is the difference between the two rows.
#
#   scripts/bench-scrape.sh                        # both targets (about 3 minutes)
#   TARGETS=dense DURATION=5 IDLE=10 scripts/bench-scrape.sh
#   TARGETS="demo demo+compat dense dense+compat" scripts/bench-scrape.sh
#   SKIP_BUILD=1 BIN_DIR=target/release scripts/bench-scrape.sh
#   WRK=/path/to/wrk scripts/bench-scrape.sh       # a wrk that is not on PATH
# The CPU figures count every thread of the tessera process, the fake NVML library's work
# included; its XID thread polls every 10 ms (real NVML blocks in the driver), so it is shown
# apart. The fake kubelet and API server of the dense node run in the example's process and
# are not counted.
set -euo pipefail
cd "$(dirname "$0")/.."

DURATION=${DURATION:-10}       # seconds per wrk run
IDLE=${IDLE:-30}               # seconds of the idle CPU window
TARGETS=${TARGETS:-demo dense}
BIN_DIR=${BIN_DIR:-target/release}
INTERVAL_S=1                   # tessera's default --sample.interval, which both targets use
PROBE="python3 scripts/bench/probe.py"

TMP=$(mktemp -d)
STARTED=()
cleanup() {
  local p
  for p in ${STARTED[@]+"${STARTED[@]}"}; do kill -TERM "$p" 2>/dev/null || true; done
  for p in ${STARTED[@]+"${STARTED[@]}"}; do wait "$p" 2>/dev/null || true; done
  rm -rf "$TMP"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

log() { echo "$*" >&2; }

WRK=${WRK:-wrk}                # a wrk binary (Debian's package is installed when missing)
if ! command -v "$WRK" >/dev/null; then
  log "installing wrk (Debian package)…"
  sudo_cmd=""
  [ "$(id -u)" -eq 0 ] || sudo_cmd="sudo"
  $sudo_cmd apt-get update -q >/dev/null
  DEBIAN_FRONTEND=noninteractive $sudo_cmd apt-get install -y -q wrk >/dev/null
fi

if [ -z "${SKIP_BUILD:-}" ]; then
  log "building the release binary, the fake NVML library and examples/dense_node…"
  cargo build --release -q -p fake-nvml
  cargo build --release -q -p tessera --bin tessera --example dense_node
fi
for f in "$BIN_DIR/tessera" "$BIN_DIR/examples/dense_node"; do
  [ -x "$f" ] || { log "$f is missing (build it, or unset SKIP_BUILD)"; exit 1; }
done

calc() { python3 -c "print($1)"; }

# Starts a target; sets URL, RUNNER (the pid we started) and TPID (tessera's pid).
start() {
  local name=$1 port
  port=$($PROBE port)
  URL=http://127.0.0.1:$port/metrics
  # tessera's flags have environment mirrors; dense_node's tessera inherits this one.
  if [[ $name == *+compat ]]; then
    export TESSERA_METRICS_DCGM_COMPAT=true
  else
    unset TESSERA_METRICS_DCGM_COMPAT
  fi
  case ${name%+compat} in
    demo)
      "$BIN_DIR/tessera" --demo --web.listen-address="127.0.0.1:$port" >"$TMP/demo.log" 2>&1 &
      RUNNER=$!
      STARTED+=("$RUNNER")
      TPID=$RUNNER
      ;;
    dense)
      "$BIN_DIR/examples/dense_node" --tessera "$BIN_DIR/tessera" --listen "127.0.0.1:$port" \
        >"$TMP/dense.out" 2>"$TMP/dense.log" &
      RUNNER=$!
      STARTED+=("$RUNNER")
      TPID=""
      for _ in $(seq 1 600); do
        TPID=$(sed -nE 's/^tessera pid=([0-9]+) .*/\1/p' "$TMP/dense.out")
        [ -n "$TPID" ] && break
        kill -0 "$RUNNER" 2>/dev/null || break
        sleep 0.1
      done
      [ -n "$TPID" ] || { log "dense_node did not start tessera:"; cat "$TMP/dense.log" >&2; exit 1; }
      ;;
    *) log "unknown target $name"; exit 1 ;;
  esac
  if ! $PROBE wait "$URL" 120 >/dev/null; then
    log "$name did not become ready; its log:"
    tail -20 "$TMP/${name%+compat}.log" >&2
    exit 1
  fi
}

stop() {
  kill -TERM "$RUNNER" 2>/dev/null || true
  wait "$RUNNER" 2>/dev/null || true
}

LAT_ROWS=()
FOOT_ROWS=()
SUMMARY=()
# verdict NAME MEASURE VALUE GOAL_OP GOAL UNIT
verdict() {
  local ok
  ok=$(calc "'met' if $3 $4 $5 else 'MISSED by ' + format($3 - $5, '.2f') + ' $6'")
  SUMMARY+=("| $1 | $2 | $3 $6 | $4 $5 $6 | $ok |")
}

bench() {
  local name=$1
  log "== $name: starting"
  start "$name"
  local bytes series sample_s nvml_s
  read -r bytes series sample_s nvml_s < <($PROBE scrape "$URL")
  log "== $name: $series series, $bytes bytes; idle CPU window ${IDLE} s"
  local s0 t0 m0 x0 s1 t1 m1 x1
  read -r s0 t0 m0 x0 < <($PROBE cpu "$TPID")
  sleep "$IDLE"
  read -r s1 t1 m1 x1 < <($PROBE cpu "$TPID")
  local rss_idle _hwm _anon _file
  read -r rss_idle _hwm _anon _file < <($PROBE mem "$TPID")
  local cycles stat_ms sched_ms sampler_ms xid_ms idle_pct
  cycles=$(calc "$IDLE / $INTERVAL_S")
  stat_ms=$(calc "format(($s1 - $s0) * 1000 / $cycles, '.2f')")
  sched_ms=$(calc "format(($t1 - $t0) * 1000 / $cycles, '.2f')")
  sampler_ms=$(calc "format(($m1 - $m0) * 1000 / $cycles, '.2f')")
  xid_ms=$(calc "format(($x1 - $x0) * 1000 / $cycles, '.2f')")
  idle_pct=$(calc "format(($t1 - $t0) * 100 / $IDLE, '.2f')")

  local spec clients threads delay encoding label line p50 p90 p99 max requests dur errs non2xx rps
  local p99_1="" p99_50="" p99_100="" p99_100_gzip="" gzip_args
  # "gzip" rows send Accept-Encoding: gzip, as Prometheus does: every scrape of one sample
  # shares one compression.
  for spec in "1 1 0 plain" "50 2 0 plain" "100 2 0 plain" "1 1 0 gzip" "100 2 0 gzip" "100 2 1000 plain"; do
    read -r clients threads delay encoding <<<"$spec"
    if [ "$delay" = 0 ]; then label="$clients back to back"; else label="$clients, ~1 scrape/s each"; fi
    gzip_args=()
    if [ "$encoding" = gzip ]; then label="$label, gzip"; gzip_args=(-H "Accept-Encoding: gzip"); fi
    log "== $name: wrk, $label, ${DURATION} s"
    line=$(WRK_DELAY_MS=$delay timeout $((DURATION + 60)) "$WRK" -t"$threads" -c"$clients" -d"${DURATION}s" \
      ${gzip_args[@]+"${gzip_args[@]}"} --timeout 5s -s scripts/bench/wrk-report.lua "$URL" | grep '^WRK ' || true)
    [ -n "$line" ] || { log "wrk printed no result"; exit 1; }
    p50=$(sed -E 's/.*p50_ms=([0-9.]+).*/\1/' <<<"$line")
    p90=$(sed -E 's/.*p90_ms=([0-9.]+).*/\1/' <<<"$line")
    p99=$(sed -E 's/.*p99_ms=([0-9.]+).*/\1/' <<<"$line")
    max=$(sed -E 's/.*max_ms=([0-9.]+).*/\1/' <<<"$line")
    requests=$(sed -E 's/.*requests=([0-9]+).*/\1/' <<<"$line")
    dur=$(sed -E 's/.*duration_s=([0-9.]+).*/\1/' <<<"$line")
    errs=$(sed -E 's/.*socket_errors=([0-9]+).*/\1/' <<<"$line")
    non2xx=$(sed -E 's/.*non2xx=([0-9]+).*/\1/' <<<"$line")
    rps=$(calc "format($requests / $dur, '.0f')")
    LAT_ROWS+=("| $name | $label | $p50 | $p90 | $p99 | $max | $rps | $((errs + non2xx)) |")
    if [ "$delay" = 0 ] && [ "$encoding" = plain ]; then
      case $clients in 1) p99_1=$p99 ;; 50) p99_50=$p99 ;; 100) p99_100=$p99 ;; esac
    fi
    if [ "$delay" = 0 ] && [ "$encoding" = gzip ] && [ "$clients" = 100 ]; then p99_100_gzip=$p99; fi
  done
  local rss hwm anon file
  read -r rss hwm anon file < <($PROBE mem "$TPID")
  local mib="/ 1024"
  FOOT_ROWS+=("| $name | $series | $bytes | $stat_ms | $sched_ms | $sampler_ms | $xid_ms | $idle_pct | $(calc "format($sample_s * 1000, '.2f')") | $(calc "format($nvml_s * 1000, '.2f')") | $(calc "format($rss_idle $mib, '.1f')") | $(calc "format($rss $mib, '.1f')") | $(calc "format($anon $mib, '.1f')") / $(calc "format($file $mib, '.1f')") | $(calc "format($hwm $mib, '.1f')") |")
  if [ "${name%+compat}" = demo ]; then
    verdict "$name" "p99, 50 clients back to back" "$p99_50" "<" 2 ms
  else
    verdict "$name" "p99, 1 client" "$p99_1" "<" 1 ms
    verdict "$name" "p99, 100 clients back to back" "$p99_100" "<" 5 ms
    verdict "$name" "p99, 100 clients back to back, gzip (as Prometheus asks)" "$p99_100_gzip" "<" 5 ms
  fi
  verdict "$name" "VmRSS after load" "$(calc "format($rss $mib, '.1f')")" "<" 30 MiB
  verdict "$name" "VmHWM (peak RSS)" "$(calc "format($hwm $mib, '.1f')")" "<" 30 MiB
  stop
}

log "machine: $(nproc) CPUs, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ //'), load average $(cut -d' ' -f1-3 /proc/loadavg)"
for t in $TARGETS; do bench "$t"; done

echo "### /metrics latency (wrk, ${DURATION} s per row, loopback; load generator on the same $(nproc) CPUs)"
echo
echo "| target | clients | p50 ms | p90 ms | p99 ms | max ms | req/s | errors |"
echo "|---|---|---:|---:|---:|---:|---:|---:|"
printf '%s\n' "${LAT_ROWS[@]}"
echo
echo "### Footprint (CPU over ${IDLE} s without scrapes, sample interval ${INTERVAL_S} s)"
echo
echo "| target | series | payload bytes | CPU ms/cycle (/proc stat) | CPU ms/cycle (all threads, schedstat) | of which sampler thread | of which XID thread | CPU % of a core | last cycle wall ms | NVML collector ms | VmRSS idle MiB | VmRSS after load MiB | anon / file MiB | VmHWM MiB |"
echo "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"
printf '%s\n' "${FOOT_ROWS[@]}"
echo
echo "### Summary against the targets"
echo
echo "| target | measure | value | goal | verdict |"
echo "|---|---|---:|---|---|"
printf '%s\n' "${SUMMARY[@]}"

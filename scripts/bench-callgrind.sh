#!/usr/bin/env bash
# Deterministic cost of one sample cycle (join + encode + drop of the previous snapshot):
# instructions counted by callgrind at 1, 2, 4, 8 and 16 GPUs of the dense node's density
# (62.5 processes and 37.5 pods per GPU), with and without MIG. Instruction counts do not move
# with machine load, so this is the measure to compare commits by; the claim it checks is that
# the cost per series stays flat (within 20 %) as the node grows.
#
#   scripts/bench-callgrind.sh            # build the bench, measure, print markdown
#   CYCLES=5 scripts/bench-callgrind.sh   # more measured cycles per point (default 3)
#   BENCH_BIN=path/to/join_encode-… scripts/bench-callgrind.sh   # skip the build
#   ALL=1 scripts/bench-callgrind.sh      # also the processes (10…2,000) and pods (1…500) curves
#
# Outputs (callgrind files, the annotated profile of the dense point) stay in
# target/bench-callgrind/.
set -euo pipefail
cd "$(dirname "$0")/.."

CYCLES=${CYCLES:-3}
OUT=target/bench-callgrind
mkdir -p "$OUT"
TMP=$(mktemp -d)
cleanup() { rm -rf "$TMP"; }
trap cleanup EXIT

command -v valgrind >/dev/null || {
  echo "valgrind is required (apt-get install valgrind)" >&2
  exit 1
}

if [ -z "${BENCH_BIN:-}" ]; then
  echo "building the join_encode bench (cargo bench --no-run)…" >&2
  cargo bench --bench join_encode --no-run --message-format=json 2>"$TMP/build.log" >"$TMP/build.json" || {
    cat "$TMP/build.log" >&2
    exit 1
  }
  BENCH_BIN=$(python3 scripts/bench/artifact.py join_encode <"$TMP/build.json")
fi
[ -x "$BENCH_BIN" ] || {
  echo "bench binary $BENCH_BIN not found" >&2
  exit 1
}

# One scale point: prints "series bytes ir_total".
measure() {
  local gpus=$1 procs=$2 pods=$3 mig=$4 file=$5
  local flags=(--callgrind "$gpus" "$procs" "$pods" --cycles "$CYCLES")
  [ "$mig" = on ] || flags+=(--no-mig)
  local line
  line=$(timeout 600 valgrind -q --tool=callgrind --toggle-collect='*measured_cycles*' \
    --callgrind-out-file="$file" "$BENCH_BIN" "${flags[@]}" 2>"$TMP/valgrind.log" | grep '^series=' || true)
  if [ -z "$line" ]; then
    echo "the bench did not run in --callgrind mode (is benches/join_encode.rs declared with harness = false in Cargo.toml?)" >&2
    cat "$TMP/valgrind.log" >&2
    exit 1
  fi
  local series bytes ir
  series=$(sed -E 's/.*series=([0-9]+).*/\1/' <<<"$line")
  bytes=$(sed -E 's/.*bytes=([0-9]+).*/\1/' <<<"$line")
  ir=$(awk '/^summary:/ {print $2}' "$file")
  echo "$series $bytes $ir"
}

echo "## Instructions per sample cycle (callgrind, $CYCLES measured cycles per point, after one warm-up cycle)"
echo
echo "| GPUs | MIG | processes | pods | series | bytes | Ir per cycle | Ir per series | vs 1 GPU |"
echo "|---:|---|---:|---:|---:|---:|---:|---:|---:|"
verdicts=()
for mig in on off; do
  base=""
  lo=""
  hi=""
  for gpus in 1 2 4 8 16; do
    procs=$((500 * gpus / 8))
    pods=$((300 * gpus / 8))
    file="$OUT/callgrind.$gpus-gpus-mig-$mig.out"
    read -r series bytes ir < <(measure "$gpus" "$procs" "$pods" "$mig" "$file")
    per_cycle=$((ir / CYCLES))
    per_series=$((per_cycle / series))
    [ -n "$base" ] || base=$per_series
    [ -n "$lo" ] && [ "$lo" -le "$per_series" ] || lo=$per_series
    [ -n "$hi" ] && [ "$hi" -ge "$per_series" ] || hi=$per_series
    ratio=$(awk -v a="$per_series" -v b="$base" 'BEGIN { printf "%.2f", a / b }')
    echo "| $gpus | $mig | $procs | $pods | $series | $bytes | $per_cycle | $per_series | $ratio |"
  done
  spread=$(awk -v lo="$lo" -v hi="$hi" 'BEGIN { printf "%.1f", (hi - lo) * 100 / lo }')
  verdict="MIG $mig: Ir per series varies by $spread % from 1 to 16 GPUs"
  if awk -v s="$spread" 'BEGIN { exit !(s <= 20) }'; then
    verdicts+=("$verdict (flat within 20 %: yes)")
  else
    verdicts+=("$verdict (flat within 20 %: NO)")
  fi
done
echo
for v in "${verdicts[@]}"; do echo "- $v"; done

dense="$OUT/callgrind.8-gpus-mig-on.out"
callgrind_annotate "$dense" >"$OUT/annotate-dense.txt" 2>/dev/null || true
callgrind_annotate --inclusive=yes "$dense" >"$OUT/annotate-dense-inclusive.txt" 2>/dev/null || true
if [ -n "${ALL:-}" ]; then
  echo
  echo "### 8 GPUs with MIG: processes and pods varied"
  echo
  echo "| processes | pods | series | bytes | Ir per cycle | Ir per series | Ir per byte |"
  echo "|---:|---:|---:|---:|---:|---:|---:|"
  for spec in "10 300" "100 300" "500 300" "1000 300" "2000 300" "500 1" "500 10" "500 100" "500 500"; do
    read -r procs pods <<<"$spec"
    read -r series bytes ir < <(measure 8 "$procs" "$pods" on "$OUT/callgrind.8-gpus-$procs-procs-$pods-pods.out")
    per_cycle=$((ir / CYCLES))
    echo "| $procs | $pods | $series | $bytes | $per_cycle | $((per_cycle / series)) | $(awk -v a="$per_cycle" -v b="$bytes" 'BEGIN { printf "%.1f", a / b }') |"
  done
fi

share() { # inclusive share of the first function matching $1
  grep -E "$1" "$OUT/annotate-dense-inclusive.txt" | head -1 | sed -E 's/^ *[0-9,]+ \( *([0-9.]+)%\).*/\1 %/'
}
echo
echo "Dense node (8 GPUs, MIG), inclusive: encode $(share ':tessera_exporter::metrics::encode::encode '), join $(share ':tessera_exporter::model::join::join '), drop of the previous snapshot $(share 'drop_in_place<tessera_exporter::model::join::Snapshot>'); inside them malloc $(share 'malloc.c:malloc '), free $(share 'malloc.c:free '), realloc $(share 'malloc.c:realloc ')."
echo
echo "### Where the dense node's cycle goes (self cost, top 12; full profile in $OUT/annotate-dense.txt)"
echo
echo '```'
grep -E '^ *[0-9,]+ \( *[0-9.]+%\)' "$OUT/annotate-dense.txt" | grep -v 'PROGRAM TOTALS' | head -12 |
  sed -E 's/ \[[^]]*\]$//' | cut -c1-150
echo '```'

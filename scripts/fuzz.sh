#!/usr/bin/env bash
# Fuzz tessera's parsers (fuzz/fuzz_targets/*) for a bounded time each and print a summary table.
#
#   scripts/fuzz.sh                  # every target, 60 s each
#   FUZZ_SECONDS=600 scripts/fuzz.sh cgroup config_file
#
# Environment:
#   FUZZ_SECONDS    seconds per target (default 60)
#   FUZZ_SANITIZER  address (default), leak, memory, thread or none
#   FUZZ_TIMEOUT    seconds one input may take before libFuzzer calls it a hang (default 10)
#   FUZZ_PROFILE    release (default: optimized, debug assertions on; long campaigns) or dev (unoptimized: builds
#                   in about 40 % of the CPU time and runs fewer inputs a second; CI's short runs)
#   CARGO_TARGET_DIR  defaults to fuzz/target
#
# Works on the stable toolchain: cargo-fuzz passes `-Zsanitizer=…` to rustc, which stable accepts
# with RUSTC_BOOTSTRAP=1 (stable ships the sanitizer runtimes); `none` needs no -Z flag at all.
# The corpus that libFuzzer grows lives in fuzz/target/corpus/<target> (ignored); the checked-in
# seeds in fuzz/corpus/<target> are only read. All targets are built by one `cargo fuzz build`,
# then run from that build. Crashes land in fuzz/artifacts/<target>/; reproduce with
# `cargo fuzz run <target> <file>`, shrink with `cargo fuzz tmin <target> <file>` (with the same
# RUSTC_BOOTSTRAP=1 and sanitizer). Exits 1 when any target found a crash.
set -euo pipefail

root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root/fuzz"

seconds="${FUZZ_SECONDS:-60}"
sanitizer="${FUZZ_SANITIZER:-address}"
per_input_timeout="${FUZZ_TIMEOUT:-10}"
case "${FUZZ_PROFILE:-release}" in
    release) build_profile=(); profile_dir=release ;;
    dev) build_profile=(--dev); profile_dir=debug ;;
    *) echo "fuzz.sh: FUZZ_PROFILE must be release or dev, not ${FUZZ_PROFILE}" >&2; exit 2 ;;
esac
all_targets=(cgroup device_id config_file duration probe_frame probe_session)
if [[ $# -gt 0 ]]; then targets=("$@"); else targets=("${all_targets[@]}"); fi

export RUSTC_BOOTSTRAP=1
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$root/fuzz/target}"
# What `cargo fuzz run` sets too, since the binaries are run directly below.
export ASAN_OPTIONS="${ASAN_OPTIONS:-detect_odr_violation=0}"
# The config_file target resolves flags too; keep the caller's TESSERA_* settings out of it.
while IFS= read -r var; do unset "$var"; done < <(env | sed -n 's/^\(TESSERA_[A-Za-z0-9_]*\)=.*/\1/p')

if ! cargo fuzz --version >/dev/null 2>&1; then
    echo "== installing cargo-fuzz"
    cargo install cargo-fuzz --locked
fi

echo "== building ${targets[*]} (sanitizer: $sanitizer, profile: $profile_dir, $(rustc --version))"
# One cargo invocation for all of them: tessera is compiled (instrumented) once.
if [[ ${#targets[@]} -eq 1 ]]; then
    cargo fuzz build "${build_profile[@]}" --sanitizer "$sanitizer" "${targets[0]}"
else
    cargo fuzz build "${build_profile[@]}" --sanitizer "$sanitizer"
fi

triple="$(rustc -vV | sed -n 's/^host: //p')"
bin_dir="$CARGO_TARGET_DIR/$triple/$profile_dir"
logs="$CARGO_TARGET_DIR/fuzz-logs"
# config_file writes each input to a temp file; keep those under the ignored target dir.
mkdir -p "$logs" "$CARGO_TARGET_DIR/tmp"
count_findings() {
    find "artifacts/$1" -maxdepth 1 -type f \( -name 'crash-*' -o -name 'oom-*' -o -name 'timeout-*' -o -name 'leak-*' \) 2>/dev/null | wc -l
}

rows=()
failed=0
for t in "${targets[@]}"; do
    work="$CARGO_TARGET_DIR/corpus/$t"
    mkdir -p "$work" "corpus/$t" "artifacts/$t"
    before=$(count_findings "$t")
    echo "== fuzzing $t for ${seconds}s (log: $logs/$t.log)"
    # The binary `cargo fuzz run` would start, with its arguments, but without a rebuild between
    # targets: tessera may be edited meanwhile, and the table should describe one build.
    set +e
    TMPDIR="$CARGO_TARGET_DIR/tmp" "$bin_dir/$t" -artifact_prefix="$root/fuzz/artifacts/$t/" \
        -max_total_time="$seconds" -timeout="$per_input_timeout" -print_final_stats=1 \
        "$work" "corpus/$t" >"$logs/$t.log" 2>&1
    rc=$?
    set -e
    after=$(count_findings "$t")
    runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$logs/$t.log" | tail -1)
    last=$(grep -E '^#[0-9]+[[:space:]].*cov: ' "$logs/$t.log" | tail -1 || true)
    cov=$(sed -n 's/.* cov: \([0-9]*\).*/\1/p' <<<"$last")
    ft=$(sed -n 's/.* ft: \([0-9]*\).*/\1/p' <<<"$last")
    corp=$(sed -n 's/.* corp: \([0-9]*\)\/.*/\1/p' <<<"$last")
    execs=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$logs/$t.log" | tail -1)
    found=$((after - before))
    if [[ $rc -ne 0 || $found -gt 0 ]]; then
        failed=1
        [[ $found -gt 0 ]] || found="? (rc $rc)"
        grep -E 'panicked at|^==[0-9]+==ERROR|Test unit written to' "$logs/$t.log" | head -5 || true
    fi
    rows+=("$t|${runs:-?}|${execs:-?}|${cov:-?}|${ft:-?}|${corp:-?}|$found")
done

echo
echo "| target | runs | exec/s | coverage (cov) | features (ft) | corpus | crashes |"
echo "|---|---:|---:|---:|---:|---:|---:|"
for r in "${rows[@]}"; do
    IFS='|' read -r t runs execs cov ft corp found <<<"$r"
    echo "| $t | $runs | $execs | $cov | $ft | $corp | $found |"
done
exit "$failed"

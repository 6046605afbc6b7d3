#!/usr/bin/env bash
# tessera's tests on arm64, emulated: built for aarch64-unknown-linux-gnu (scripts/lib/arm64.sh)
# and run under qemu-user on this x86_64 machine:
#   - the exporter's unit tests (tessera-exporter --lib) and the CUDA probe's (tessera-probe --lib),
#   - the end-to-end tests that drive the arm64 binary against the arm64 fake NVML: the golden
#     expositions (e2e's nvml:: and attribution::) and the DCGM surface (dcgm_compat::), less the
#     six whose scenarios move on the fake's clock faster than emulation starts (listed below),
#   - the expositions those tests compare with tests/golden/*.txt, written out as compared, and
#     checked byte for byte against the same files the x86_64 tests use.
# The test binaries run through the runner in .cargo/config.toml; tessera and the NVML workers
# it starts are arm64 processes started by arm64 processes, which the kernel hands to qemu
# through binfmt_misc (qemu-user-static). One cargo run builds; the unit tests, then e2e's topics run.
# Last line: "test_arm64: N passed, M failed" (cargo's test binaries, then the golden check).
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=lib/arm64.sh
. scripts/lib/arm64.sh
passed=0
failed=0
finish() { echo "test_arm64: $passed passed, $failed failed"; ((failed == 0)); }
if ! arm64_check; then failed=1; finish; exit 1; fi
if ! arm64_binfmt_ready; then
  echo "test-arm64.sh: no enabled binfmt_misc entry qemu-aarch64 (scripts/install-test-deps.sh sets it up)" >&2
  failed=1; finish; exit 1
fi
units=(--target "$ARM64_TRIPLE" -p tessera-exporter -p tessera-probe --lib)
e2e=(--target "$ARM64_TRIPLE" -p tessera --test e2e)
# The e2e binary's topics run here: golden expositions and attribution, and the DCGM surface.
topics=(nvml:: attribution:: dcgm_compat::)
# Left out under emulation, with the golden file each would compare: their scenarios change the
# GPUs on the fake NVML's clock within the first second after nvmlInit (a GPU lost at 300 ms, a
# call that hangs, a MIG re-partition, processes that leave), and an emulated debug build reaches
# its first discovery or sample only after that, so the test sees another sequence of events
# than it was written for. They run natively in the cargo-test stage.
skipped=(
  a_lost_gpu_reports_down_and_the_others_keep_going=gpu-lost
  a_lost_gpu_shows_its_last_xid_and_the_other_gpu_none=
  a_hung_call_isolates_its_gpu_and_serving_goes_on=
  a_live_mig_repartition_leaves_no_stale_series=mig-repartitioned
  processes_that_leave_take_their_series_with_them=churn-after
  process_utilization_is_read_on_its_own_cadence=
)
skip_args=()
not_run=" "
for s in "${skipped[@]}"; do
  skip_args+=(--skip "${s%%=*}")
  [[ -z ${s#*=} ]] || not_run+="${s#*=}.txt "
done
goldens=$(mktemp -d "${TMPDIR:-/tmp}/tessera-arm64-golden.XXXXXX")
trap 'rm -rf "$goldens"' EXIT
log=$goldens/cargo-test.log
# TESSERA_ARM64_COMPARE=DIR: only the golden check below, of expositions written to DIR.
if [[ -n ${TESSERA_ARM64_COMPARE:-} ]]; then
  cp "$TESSERA_ARM64_COMPARE"/*.txt "$goldens/"
else
start=$(date +%s)
arm64_cargo test --locked --no-run "${units[@]}" --test e2e -p tessera
built=$(date +%s)
echo "arm64: test build $((built - start)) s"
set +e
# Never rewrite the golden files from an emulated run.
unset TESSERA_UPDATE_GOLDEN
arm64_cargo test --locked --no-fail-fast "${units[@]}" 2>&1 | tee "$log"
rc=${PIPESTATUS[0]}
TESSERA_GOLDEN_OUT="$goldens" arm64_cargo test --locked --no-fail-fast "${e2e[@]}" -- "${topics[@]}" \
  "${skip_args[@]}" 2>&1 | tee -a "$log"
((PIPESTATUS[0] == 0)) || rc=1
set -e
echo "arm64: tests ran $(($(date +%s) - built)) s under qemu"
binaries=$(grep -c '^test result: ok\.' "$log" || true)
broken=$(grep -c '^test result: FAILED' "$log" || true)
passed=$((passed + binaries))
failed=$((failed + broken))
((rc == 0 || broken > 0)) || failed=$((failed + 1))
fi
# Byte for byte: each exposition the arm64 run compared with a golden file is that file, or its
# series (name and labels, every line's text before the value) are that file's byte for byte and
# only values differ, in the float noise the golden comparison allows (windowed figures: the
# tests passing above checked them against it). The x86_64 runs differ from the files the same
# way; the count of files identical to the last byte is reported.
want=0
same=0
series_same=0
for f in tests/golden/*.txt; do
  name=$(basename "$f")
  [[ $not_run == *" $name "* ]] && continue
  want=$((want + 1))
  got=$goldens/$name
  if [[ ! -f $got ]]; then
    echo "FAIL  golden $name: no arm64 exposition was compared with it"
  elif cmp -s "$f" "$got"; then
    same=$((same + 1)); series_same=$((series_same + 1))
  elif cmp -s <(sed 's/ [^ ]*$//' "$f") <(sed 's/ [^ ]*$//' "$got"); then
    series_same=$((series_same + 1))
    echo "      golden $name: same series, $(diff "$f" "$got" | grep -c '^>') values differ in float noise"
  else
    echo "FAIL  golden $name: the arm64 exposition has other series"
    { diff <(sed 's/ [^ ]*$//' "$f") <(sed 's/ [^ ]*$//' "$got") || true; } | head -20 | sed 's/^/      /'
  fi
done
echo "      not run under emulation (scenario clock, above):$not_run"
if ((series_same == want)); then
  passed=$((passed + 1))
  echo "ok    golden: $want of $want expositions have the golden files' series byte for byte, $same of them every value too (x86_64's files)"
else
  failed=$((failed + 1)); echo "FAIL  golden: $series_same of $want expositions have the golden files' series"
fi
finish

#!/usr/bin/env bash
# tessera's tests on arm64, emulated: built for aarch64-unknown-linux-gnu (scripts/lib/arm64.sh)
# and run under qemu-user on this x86_64 machine:
#   - the exporter's unit tests (tessera-exporter --lib) and the CUDA probe's (tessera-probe --lib),
#   - the end-to-end tests that drive the arm64 binary against the arm64 fake NVML: every golden
#     exposition (nvml_e2e, attribution_e2e) and the DCGM surface (dcgm_compat_e2e),
#   - the expositions those tests compare with tests/golden/*.txt, written out as compared, and
#     checked byte for byte against the same files the x86_64 tests use.
# The test binaries run through the runner in .cargo/config.toml; tessera and the NVML workers
# it starts are arm64 processes started by arm64 processes, which the kernel hands to qemu
# through binfmt_misc (qemu-user-static). One cargo run builds, a second runs.
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
targets=(--target "$ARM64_TRIPLE" -p tessera -p tessera-exporter -p tessera-probe --lib
  --test nvml_e2e --test attribution_e2e --test dcgm_compat_e2e)
start=$(date +%s)
arm64_cargo test --locked --no-run "${targets[@]}"
built=$(date +%s)
echo "arm64: test build $((built - start)) s"
goldens=$(mktemp -d "${TMPDIR:-/tmp}/tessera-arm64-golden.XXXXXX")
trap 'rm -rf "$goldens"' EXIT
log=$goldens/cargo-test.log
set +e
# Never rewrite the golden files from an emulated run.
unset TESSERA_UPDATE_GOLDEN
TESSERA_GOLDEN_OUT="$goldens" arm64_cargo test --locked --no-fail-fast "${targets[@]}" 2>&1 | tee "$log"
rc=${PIPESTATUS[0]}
set -e
echo "arm64: tests ran $(($(date +%s) - built)) s under qemu"
binaries=$(grep -c '^test result: ok\.' "$log" || true)
broken=$(grep -c '^test result: FAILED' "$log" || true)
passed=$((passed + binaries))
failed=$((failed + broken))
((rc == 0 || broken > 0)) || failed=$((failed + 1))
# Byte for byte: each exposition the arm64 run compared with a golden file is that file.
want=$(find tests/golden -name '*.txt' | wc -l)
same=0
for f in tests/golden/*.txt; do
  name=$(basename "$f")
  if [[ ! -f $goldens/$name ]]; then
    echo "FAIL  golden $name: no arm64 exposition was compared with it"
  elif cmp -s "$f" "$goldens/$name"; then
    same=$((same + 1))
  else
    echo "FAIL  golden $name: the arm64 exposition differs in its bytes"
    diff "$f" "$goldens/$name" | head -20 | sed 's/^/      /'
  fi
done
if ((same == want)); then
  passed=$((passed + 1)); echo "ok    golden: $same of $want expositions byte-identical to tests/golden (x86_64's)"
else
  failed=$((failed + 1)); echo "FAIL  golden: $same of $want expositions byte-identical to tests/golden"
fi
finish

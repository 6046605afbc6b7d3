#!/usr/bin/env bash
# tessera on arm64, emulated: the release artefacts the arm64 image ships (scripts/build-arm64.sh)
# and the tests, built for aarch64-unknown-linux-gnu (scripts/lib/arm64.sh) in the release profile
# and run under qemu-user on this x86_64 machine:
#   - the exporter's unit tests (tessera-exporter --lib) and the CUDA probe's (tessera-probe --lib),
#   - the end-to-end tests that drive the arm64 binary against the arm64 fake NVML: the golden
#     expositions (e2e's nvml:: and attribution::) and the DCGM surface (dcgm_compat::), four
#     of them with the fake NVML's timeline stretched (listed below),
#   - every exposition those tests compare with tests/golden/*.txt, written out as compared, and
#     checked byte for byte against the same files the x86_64 tests use.
# The test binaries run directly: the kernel hands them, and the arm64 tessera and NVML workers
# they start, to qemu through binfmt_misc (qemu-user-static). The image stage after this one
# finds the arm64 artefacts built.
# Last line: "test_arm64: N passed, M failed" (the test binaries, then the golden check).
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
# One release build of every test binary (the release profile's dependencies are those
# scripts/build-arm64.sh compiled for the image's binary, so only the test-only crates and the
# workspace's own compile again); the binaries then run one by one, each through qemu. Optimized
# code under emulation reaches its first sample within the fake NVML's first scenario phase, so
# the scenarios that change the GPUs within a second of nvmlInit (a hung call, a MIG
# re-partition, an XID) run here too.
packages=(-p tessera-exporter -p tessera-probe -p tessera)
# The e2e binary's topics run here: golden expositions and attribution, and the DCGM surface.
topics=(nvml:: attribution:: dcgm_compat::)
# Run apart, with the fake NVML's timeline stretched (TESSERA_FAKE_NVML_TIMELINE_SCALE): their
# scenarios change 300-600 ms after nvmlInit, and an emulated exporter beside busy neighbours can
# take its first sample after that, so it would never see the first phase (a lost GPU's UUID
# and XID, the churn's first slow readings, the first per-process read). Stretched, the phases
# come after the first sample, as they do natively; the expositions are then the native ones.
stretched=(
  nvml::a_lost_gpu_reports_down_and_the_others_keep_going
  dcgm_compat::a_lost_gpu_shows_its_last_xid_and_the_other_gpu_none
  nvml::processes_that_leave_take_their_series_with_them
  nvml::process_utilization_is_read_on_its_own_cadence
)
timeline_scale=5
skips=()
for s in "${stretched[@]}"; do skips+=(--skip "$s"); done
goldens=$(mktemp -d "${TMPDIR:-/tmp}/tessera-arm64-golden.XXXXXX")
trap 'rm -rf "$goldens"' EXIT
log=$goldens/cargo-test.log
# TESSERA_ARM64_COMPARE=DIR: only the golden check below, of expositions written to DIR.
if [[ -n ${TESSERA_ARM64_COMPARE:-} ]]; then
  cp "$TESSERA_ARM64_COMPARE"/*.txt "$goldens/"
else
start=$(date +%s)
scripts/build-arm64.sh
shipped=$(date +%s)
arm64_cargo test --release --locked --no-run --message-format=json --target "$ARM64_TRIPLE" \
  "${packages[@]}" --lib --test e2e >"$goldens/build.json"
built=$(date +%s)
echo "arm64: release build $((shipped - start)) s, test build $((built - shipped)) s"
# path KIND NAME: the test executable cargo built for that target.
executable() {
  python3 - "$goldens/build.json" "$1" "$2" <<'PY'
import json, sys
for line in open(sys.argv[1]):
    m = json.loads(line)
    t = m.get("target", {})
    if m.get("reason") == "compiler-artifact" and m.get("executable") and m.get("profile", {}).get("test") \
            and t.get("name") == sys.argv[3] \
            and (sys.argv[2] in t.get("kind", []) or sys.argv[2] == "lib" and "rlib" in t.get("kind", [])):
        print(m["executable"])
PY
}
set +e
# Never rewrite the golden files from an emulated run.
unset TESSERA_UPDATE_GOLDEN
rc=0
for unit in tessera_exporter tessera_probe; do
  bin=$(executable lib "$unit")
  [[ -n $bin ]] || { echo "arm64: no unit-test binary for $unit" | tee -a "$log"; rc=1; continue; }
  echo "arm64: $unit's unit tests ($(python3 scripts/lib/elf_machine.py "$bin"))"
  "$bin" 2>&1 | tee -a "$log"
  ((PIPESTATUS[0] == 0)) || rc=1
done
e2e=$(executable test e2e)
if [[ -n $e2e ]]; then
  echo "arm64: e2e ${topics[*]} ($(python3 scripts/lib/elf_machine.py "$e2e"))"
  TESSERA_GOLDEN_OUT="$goldens" "$e2e" "${topics[@]}" "${skips[@]}" 2>&1 | tee -a "$log"
  ((PIPESTATUS[0] == 0)) || rc=1
  echo "arm64: e2e, the fake NVML's timeline ${timeline_scale}x: ${stretched[*]}"
  TESSERA_FAKE_NVML_TIMELINE_SCALE=$timeline_scale TESSERA_GOLDEN_OUT="$goldens" "$e2e" --exact \
    "${stretched[@]}" 2>&1 | tee -a "$log"
  ((PIPESTATUS[0] == 0)) || rc=1
else
  echo "arm64: no e2e test binary" | tee -a "$log"; rc=1
fi
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
if ((series_same == want)); then
  passed=$((passed + 1))
  echo "ok    golden: $want of $want expositions have the golden files' series byte for byte, $same of them every value too (x86_64's files)"
else
  failed=$((failed + 1)); echo "FAIL  golden: $series_same of $want expositions have the golden files' series"
fi
finish

#!/usr/bin/env bash
# Builds tessera for arm64 GPU hosts (Grace Hopper GH200, Grace Blackwell GB200/GB300) on an
# x86_64 machine, from the same sources and Cargo.lock, in one cargo run:
#   - the release binary without the demo (what the image ships),
#   - the CUDA probe, libtessera_probe.so,
#   - the fake NVML library, libfake_nvml.so (tests and the image test; never shipped).
# Debian's Rust with the arm64 standard library, aarch64-linux-gnu-gcc as linker and for the C
# and assembly parts of `ring` (the one C dependency), target dir target/arm64 (scripts/lib/arm64.sh).
#
#   scripts/build-arm64.sh          # -> target/arm64/aarch64-unknown-linux-gnu/release/...
# Last line: the three artefacts and their ELF machine.
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=lib/arm64.sh
. scripts/lib/arm64.sh
arm64_check
arm64_cargo build --release --locked --target "$ARM64_TRIPLE" -p tessera -p tessera-probe -p fake-nvml \
  --no-default-features
rel=$ARM64_OUT/release
for f in "$rel/tessera" "$rel/libtessera_probe.so" "$rel/libfake_nvml.so"; do
  machine=$(python3 scripts/lib/elf_machine.py "$f")
  [[ $machine == aarch64 ]] || { echo "build-arm64.sh: $f is $machine, not aarch64" >&2; exit 1; }
done
# A string only the demo's code holds: this build is the image's, without it.
if grep -qa 'serving the built-in DEMO node' "$rel/tessera"; then
  echo "build-arm64.sh: $rel/tessera has the demo built in" >&2
  exit 1
fi
echo "arm64: $rel/tessera $rel/libtessera_probe.so $rel/libfake_nvml.so (aarch64)"

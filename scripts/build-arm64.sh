#!/usr/bin/env bash
# Builds tessera for arm64 GPU hosts (Grace Hopper GH200, Grace Blackwell GB200/GB300) on an
# x86_64 machine, from the same sources and Cargo.lock, in one cargo run:
#   - the release binary without the demo (what the image ships),
#   - the CUDA probe, libtessera_probe.so (the tests' build),
#   - the fake NVML library, libfake_nvml.so (tests and the image test; never shipped),
#   - the CUDA probe the image ships, linked by zig against glibc 2.17 as the x86_64 one is
#     (scripts/build-probe.sh; cargo-zigbuild driving Debian's Rust): it loads inside tenant
#     images, and arm64 CUDA images built on older distributions have an older glibc than
#     Debian 12's 2.36. In target/arm64/probe/.
# Debian's Rust with the arm64 standard library, aarch64-linux-gnu-gcc as linker and for the C
# and assembly parts of `ring` (the one C dependency), target dir target/arm64 (scripts/lib/arm64.sh).
#
#   scripts/build-arm64.sh          # -> target/arm64/aarch64-unknown-linux-gnu/release/...
# Last line: the artefacts and their ELF machine.
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
command -v cargo-zigbuild >/dev/null || { echo "build-arm64.sh: cargo-zigbuild is required (pip install ziglang cargo-zigbuild)" >&2; exit 1; }
zig_dir=$ARM64_TARGET_DIR/zig
arm64_cargo_in "$zig_dir" zigbuild --release -q --locked -p tessera-probe --target "$ARM64_TRIPLE.2.17"
probe_dir=$ARM64_TARGET_DIR/probe
mkdir -p "$probe_dir"
install -m 0755 "$zig_dir/$ARM64_TRIPLE/release/libtessera_probe.so" "$probe_dir/libtessera_probe.so"
[[ $(python3 scripts/lib/elf_machine.py "$probe_dir/libtessera_probe.so") == aarch64 ]] \
  || { echo "build-arm64.sh: $probe_dir/libtessera_probe.so is not aarch64" >&2; exit 1; }
scripts/build-probe.sh --check "$probe_dir/libtessera_probe.so" >/dev/null
echo "arm64: $rel/tessera $rel/libtessera_probe.so $rel/libfake_nvml.so $probe_dir/libtessera_probe.so (aarch64; the last: glibc 2.17)"

# Cross-building for arm64 (aarch64-unknown-linux-gnu) from an x86_64 machine, shared by
# scripts/build-arm64.sh, scripts/test-arm64.sh and scripts/image.sh. Source it.
#
# The arm64 build uses Debian's Rust (/usr/bin/cargo, /usr/bin/rustc, libstd-rust-web-dev:arm64):
# the rustup toolchain that builds x86_64 has no aarch64 standard library here. It gets its own
# target directory, so it never invalidates the x86_64 build in target/. The linker and the
# qemu runner are set in .cargo/config.toml; scripts/install-test-deps.sh installs all of it.
#
#   arm64_check            fails (with what is missing) unless the toolchain, linker and qemu are here
#   arm64_cargo ARGS...    Debian's cargo and rustc, target dir $ARM64_TARGET_DIR
#   ARM64_OUT              where its artefacts land: $ARM64_TARGET_DIR/aarch64-unknown-linux-gnu
ARM64_TRIPLE=aarch64-unknown-linux-gnu
ARM64_CARGO=${TESSERA_ARM64_CARGO:-/usr/bin/cargo}
ARM64_RUSTC=${TESSERA_ARM64_RUSTC:-/usr/bin/rustc}
ARM64_TARGET_DIR=${TESSERA_ARM64_TARGET_DIR:-$PWD/target/arm64}
ARM64_OUT=$ARM64_TARGET_DIR/$ARM64_TRIPLE

arm64_check() {
  local missing=()
  [[ -x $ARM64_CARGO ]] || missing+=("$ARM64_CARGO (cargo-web)")
  [[ -x $ARM64_RUSTC ]] || missing+=("$ARM64_RUSTC (rustc-web)")
  if [[ -x $ARM64_RUSTC ]]; then
    [[ -d $("$ARM64_RUSTC" --print sysroot)/lib/rustlib/$ARM64_TRIPLE/lib ]] \
      || missing+=("the $ARM64_TRIPLE standard library (libstd-rust-web-dev:arm64)")
  fi
  command -v aarch64-linux-gnu-gcc >/dev/null || missing+=("aarch64-linux-gnu-gcc (gcc-aarch64-linux-gnu)")
  command -v qemu-aarch64 >/dev/null || missing+=("qemu-aarch64 (qemu-user)")
  if ((${#missing[@]})); then
    printf 'arm64: missing %s (scripts/install-test-deps.sh installs it)\n' "${missing[@]}" >&2
    return 1
  fi
}

# A process the tests start (tessera, its NVML workers) is an arm64 executable started by an
# arm64 one: the kernel hands it to qemu only through a binfmt_misc entry.
arm64_binfmt_ready() {
  [[ -r /proc/sys/fs/binfmt_misc/qemu-aarch64 ]] && grep -qx enabled /proc/sys/fs/binfmt_misc/qemu-aarch64
}

arm64_cargo() {
  arm64_cargo_in "$ARM64_TARGET_DIR" "$@"
}

# arm64_cargo_in DIR ARGS...: Debian's cargo with DIR as target dir.
arm64_cargo_in() {
  local dir=$1
  shift
  # The rustup toolchain's variables would send Debian's cargo to the wrong compiler; CARGO
  # names Debian's for a cargo subcommand (cargo-zigbuild) to call back.
  env -u RUSTUP_TOOLCHAIN -u RUSTC_WRAPPER CARGO="$ARM64_CARGO" RUSTC="$ARM64_RUSTC" \
    RUSTDOC="${ARM64_RUSTC%rustc}rustdoc" CARGO_TARGET_DIR="$dir" "$ARM64_CARGO" "$@"
}

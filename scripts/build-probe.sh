#!/usr/bin/env bash
# Builds the CUDA probe that ships (in the image, copied onto nodes by `tessera install-probe`)
# against an old glibc, and checks that it needs nothing newer.
#
#   scripts/build-probe.sh                  # -> target/probe/libtessera_probe.so, checked
#   scripts/build-probe.sh --check LIB...   # only the check, on libraries built elsewhere
#
# Why: the probe is loaded into the tenants' processes, inside the tenants' images, by the CUDA
# driver (CUDA_INJECTION64_PATH). Built on Debian 12 it needs GLIBC_2.34, which images on
# Ubuntu 20.04 (2.31), UBI 8 (2.28) or Amazon Linux 2 (2.26) do not have. cargo-zigbuild links
# against the glibc version named in the target triple (manylinux2014's 2.17 by default).
#
# The check fails when the library asks for a GLIBC_ symbol version past the baseline
# (`objdump -T`), or needs a shared library outside glibc's own (libgcc_s or libstdc++ are not
# in every image).
#
# Environment: PROBE_GLIBC (the baseline, default 2.17), PROBE_OUT (default target/probe).
# Needs: objdump (binutils), and for the build `cargo-zigbuild` and `ziglang` from PyPI
# (scripts/install-test-deps.sh installs them).
set -euo pipefail
cd "$(dirname "$0")/.."
baseline=${PROBE_GLIBC:-2.17}
out=${PROBE_OUT:-target/probe}
# The libraries of glibc itself: present wherever glibc is.
glibc_libs='^(libc|libm|libdl|libpthread|librt|ld-linux-x86-64|ld-linux-aarch64)\.so\.[0-9]+$'

# Prints the highest GLIBC_ version LIB asks for ("none" if it asks for none).
highest_glibc() {
  objdump -T "$1" | grep -o 'GLIBC_[0-9][0-9.]*' | sed 's/^GLIBC_//' | sort -uV | tail -n 1 | grep . || echo none
}

# Succeeds when version $1 is at most version $2.
version_le() {
  [[ $(printf '%s\n%s\n' "$1" "$2" | sort -V | head -n 1) == "$1" ]]
}

check() {
  local lib=$1 top needed bad=0
  [[ -f $lib ]] || { echo "build-probe.sh: $lib is missing" >&2; return 1; }
  top=$(highest_glibc "$lib")
  if [[ $top != none ]] && ! version_le "$top" "$baseline"; then
    echo "FAIL $lib needs GLIBC_$top, past the baseline GLIBC_$baseline:" >&2
    objdump -T "$lib" | grep -E "GLIBC_$top([^0-9.]|$)" | sed 's/^/    /' >&2
    bad=1
  fi
  needed=$(objdump -p "$lib" | awk '$1 == "NEEDED" {print $2}')
  for n in $needed; do
    if ! grep -qE "$glibc_libs" <<<"$n"; then
      echo "FAIL $lib needs $n, which is not part of glibc" >&2
      bad=1
    fi
  done
  if ((bad == 0)); then
    echo "ok $lib: highest GLIBC_$top (baseline $baseline); needs $(tr '\n' ' ' <<<"$needed")"
  fi
  return "$bad"
}

if [[ ${1:-} == --check ]]; then
  shift
  (($#)) || { echo "usage: scripts/build-probe.sh --check LIB..." >&2; exit 2; }
  rc=0
  for lib in "$@"; do check "$lib" || rc=1; done
  exit "$rc"
fi
(($# == 0)) || { echo "usage: scripts/build-probe.sh [--check LIB...]" >&2; exit 2; }

command -v objdump >/dev/null || { echo "build-probe.sh: objdump is required (binutils)" >&2; exit 1; }
command -v cargo-zigbuild >/dev/null || { echo "build-probe.sh: cargo-zigbuild is required (pip install ziglang cargo-zigbuild)" >&2; exit 1; }
arch=$(uname -m)
triple=$arch-unknown-linux-gnu
# The fake CUPTI beside it: the probe's load test (scripts/test-probe-glibc.sh) drives it with
# that, in a process of its own.
cargo zigbuild --release -q -p tessera-probe -p fake-cupti --target "$triple.$baseline"
mkdir -p "$out"
built=target/$triple/release
install -m 0755 "$built/libtessera_probe.so" "$out/libtessera_probe.so"
install -m 0755 "$built/libfake_cupti.so" "$out/libfake_cupti.so"
check "$out/libtessera_probe.so"

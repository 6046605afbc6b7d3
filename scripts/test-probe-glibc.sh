#!/usr/bin/env bash
# The CUDA probe that ships loads wherever CUDA runs: built against an old glibc
# (scripts/build-probe.sh), it asks for no GLIBC_ symbol version past the baseline and needs no
# library outside glibc; the check itself rejects a library that does; and the built library
# loads into a process the way the CUDA driver loads it and reports to a socket.
#
#   scripts/test-probe-glibc.sh        # ends with `test_probe_glibc: N passed, M failed`
#
# Environment: PROBE_GLIBC (baseline, default 2.17).
set -uo pipefail
cd "$(dirname "$0")/.."
passed=0 failed=0
# shellcheck source=lib/harness.sh
. scripts/lib/harness.sh
baseline=${PROBE_GLIBC:-2.17}
out=$(mktemp -d "${TMPDIR:-/tmp}/tessera-probe-glibc.XXXXXX")
trap 'rm -rf "$out"' EXIT

section "the shipped probe, built against glibc $baseline"
start=$(date +%s)
if PROBE_OUT=$out scripts/build-probe.sh >"$out/build.log" 2>&1; then
  pass "built and checked in $(($(date +%s) - start)) s: $(grep '^ok ' "$out/build.log" | sed 's/^ok //')"
else
  fail "scripts/build-probe.sh"; sed 's/^/      /' "$out/build.log" | tail -20
fi
lib=$out/libtessera_probe.so

section "the check can fail"
# One below the library's own highest version: the same library must then be refused.
top=$(objdump -T "$lib" 2>/dev/null | grep -o 'GLIBC_[0-9][0-9.]*' | sed 's/^GLIBC_//' | sort -uV | tail -n 1)
lower=$(objdump -T "$lib" 2>/dev/null | grep -o 'GLIBC_[0-9][0-9.]*' | sed 's/^GLIBC_//' | sort -uV | tail -n 2 | head -n 1)
if [[ -n $top && $lower != "$top" ]] && ! PROBE_GLIBC=$lower scripts/build-probe.sh --check "$lib" >/dev/null 2>&1; then
  pass "a baseline of $lower refuses the library that needs GLIBC_$top"
else
  fail "a baseline below the library's GLIBC_$top was not refused"
fi
# The probe built as the workspace builds it, on this machine's glibc: on Debian 12 it needs
# GLIBC_2.34 and libgcc_s, the build that could not load in older images.
if cargo build --release -q -p tessera-probe >"$out/native.log" 2>&1; then
  native=target/release/libtessera_probe.so
  ntop=$(objdump -T "$native" | grep -o 'GLIBC_[0-9][0-9.]*' | sed 's/^GLIBC_//' | sort -uV | tail -n 1)
  if [[ $(printf '%s\n%s\n' "$ntop" "$baseline" | sort -V | tail -n 1) == "$baseline" ]]; then
    pass "this machine's own build needs only GLIBC_$ntop (no newer glibc here to refuse)"
  elif ! scripts/build-probe.sh --check "$native" >"$out/native-check.log" 2>&1 \
    && grep -q "needs GLIBC_$ntop" "$out/native-check.log"; then
    pass "the probe built on this machine's glibc (GLIBC_$ntop) is refused"
  else
    fail "the probe built on this machine's glibc (GLIBC_$ntop) passed the check"
  fi
else
  fail "cargo build --release -p tessera-probe"; tail -20 "$out/native.log" | sed 's/^/      /'
fi

section "the shipped probe loads and reports"
if [[ -f $lib ]] && res=$(timeout 30 python3 tests/probe/load_probe.py "$lib" "$out/libfake_cupti.so" 2>&1); then
  pass "dlopen + InitializeInjection with the stand-in CUPTI: $res"
else
  fail "the baseline probe did not load and report: ${res:-}"
fi

echo
echo "test_probe_glibc: $passed passed, $failed failed"
((failed == 0))

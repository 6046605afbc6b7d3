#!/usr/bin/env bash
# Builds, here, what lab/device/containers/run.sh carries to the GPU host besides tessera: the
# shipped probe (scripts/build-probe.sh, glibc 2.17) and the broken injection libraries whose
# effect on a CUDA process inject.py measures. zig (PyPI `ziglang`) compiles them, so the host
# needs no compiler.
#
#   bash lab/device/containers/build.sh      # -> target/ctr-inject/*.so, target/probe/
#
# The libraries, each a CUDA_INJECTION64_PATH a tenant could be handed:
#   unresolved_func.so   InitializeInjection calls a function no library defines (bound lazily)
#   unresolved_data.so   InitializeInjection reads a variable no library defines (bound at load)
#   glibc_too_new.so     asks for GLIBC_9.99 (a GLIBC_2.17 reference renamed): what a probe built
#                        on a newer glibc than the image's looks like to the loader
#   no_init.so           no InitializeInjection at all
#   init_fails.so        InitializeInjection returns 0
set -euo pipefail
cd "$(dirname "$0")/../../.."
out=target/ctr-inject
mkdir -p "$out"
src=$(mktemp -d)
trap 'rm -rf "$src"' EXIT
zcc() { python3 -m ziglang cc -target x86_64-linux-gnu.2.17 -shared -fPIC -O1 "$@"; }
cat >"$src/unresolved_func.c" <<'C'
extern void tessera_no_such_function(void);
int InitializeInjection(void) { tessera_no_such_function(); return 1; }
C
cat >"$src/unresolved_data.c" <<'C'
extern int tessera_no_such_variable;
int InitializeInjection(void) { return tessera_no_such_variable + 1; }
C
cat >"$src/glibc.c" <<'C'
#include <time.h>
int InitializeInjection(void) { struct timespec t; return clock_gettime(CLOCK_MONOTONIC, &t) == 0; }
C
cat >"$src/no_init.c" <<'C'
int tessera_not_an_injection(void) { return 1; }
C
cat >"$src/init_fails.c" <<'C'
int InitializeInjection(void) { return 0; }
C
for n in unresolved_func unresolved_data no_init init_fails; do
  zcc -o "$out/$n.so" "$src/$n.c"
done
zcc -o "$src/glibc.so" "$src/glibc.c"
# The same length, so only the name changes: the loader then finds no such version in libc.
python3 - "$src/glibc.so" "$out/glibc_too_new.so" <<'PY'
import sys
b = open(sys.argv[1], "rb").read()
assert b.count(b"GLIBC_2.17\0") == 1, "expected one GLIBC_2.17 reference"
open(sys.argv[2], "wb").write(b.replace(b"GLIBC_2.17\0", b"GLIBC_9.99\0"))
PY
chmod 0755 "$out"/*.so
scripts/build-probe.sh
for f in "$out"/*.so; do
  echo "$f: $(objdump -T "$f" | grep -o 'GLIBC_[0-9.]*' | sort -uV | tr '\n' ' ')$(objdump -T "$f" | grep -c '\*UND\*.*tessera_no_such' || true) unresolved"
done

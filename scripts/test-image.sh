#!/usr/bin/env bash
# Builds the container images (scripts/image.sh --arch amd64,arm64) and runs them with podman:
#   - its files are the binary (built without the demo), the CUDA probe, exactly the libraries
#     ldd lists, CA roots and passwd/group, and no fake NVML; OCI labels, user 65534, entrypoint
#     tessera, tag = the Cargo version; < 30 MB; its CUDA probe needs nothing past glibc 2.17
#     (scripts/build-probe.sh --check);
#   - as on a GPU node, where the NVIDIA container toolkit mounts the driver's libnvidia-ml.so.1
#     into the container: the fake NVML (crates/fake-nvml, demo scenario) mounted read-only at
#     that place, a read-only root filesystem, no kubelet nor API server: /readyz and /metrics
#     answer on a host port bound to 127.0.0.1, the scenario's 9 GPUs are there, "discovered
#     GPUs" is logged once and the log has no colour codes; SIGTERM stops it with exit code 0;
#   - without NVML: one line naming the missing library, exit code 1;
#   - `--demo`: one line saying this build has no demo, exit code 2;
#   - the arm64 image (cross-built, scripts/build-arm64.sh): platform linux/arm64, an aarch64
#     binary, its own libraries, the same entrypoint and user, an aarch64 CUDA probe that needs
#     nothing past glibc 2.17 either; the manifest list names both
#     images; run under qemu (binfmt_misc) with the arm64 fake NVML mounted, /readyz and
#     /metrics answer with the 9 GPUs and SIGTERM ends it with exit code 0.
#     TESSERA_IMAGE_ARCHES=amd64 leaves the arm64 half out.
# podman runs with --storage-driver vfs --runtime runc and explicit ulimits (crun fails on
# hybrid cgroups; runc cannot raise rlimits beyond the host's) and a private storage root, so
# nothing is left behind. Every step is bounded; containers are removed on any exit.
# Last line: "N passed, M failed".
set -euo pipefail
cd "$(dirname "$0")/.."
# The image's binary is a second feature set of the release build (no demo), and the arm64 image
# a cross build of it: on a shared 2-core machine the two builds take far longer than the checks
# after them, so the builds have their own bound and the watchdog covers only what runs them.
BUILD_LIMIT=${TESSERA_IMAGE_BUILD_TIMEOUT:-2400}
LIMIT=${TESSERA_IMAGE_TEST_TIMEOUT:-600}
passed=0
failed=0
work=$(mktemp -d "${TMPDIR:-/tmp}/tessera-image-test.XXXXXX")
name=tessera-test-$$
p() {
  timeout 60 podman --root "$work/storage" --runroot "$work/run" --storage-driver vfs \
    --runtime runc "$@"
}
# The arm64 image in a storage of its own: both images carry the same version.
pa() {
  timeout 120 podman --root "$work/storage-arm64" --runroot "$work/run-arm64" --storage-driver vfs \
    --runtime runc "$@"
}
cleanup() {
  p rm -f -t 0 "$name" "$name-nonvml" "$name-nodemo" >/dev/null 2>&1 || true
  p rmi -af >/dev/null 2>&1 || true
  pa rm -f -t 0 "$name-arm64" >/dev/null 2>&1 || true
  pa rmi -af >/dev/null 2>&1 || true
  rm -rf "$work" 2>/dev/null || true
  [[ -n ${watchdog:-} ]] && kill "$watchdog" 2>/dev/null || true
}
trap cleanup EXIT
trap 'echo "interrupted"; echo "$passed passed, $((failed + 1)) failed"; exit 130' INT TERM

pass() { passed=$((passed + 1)); echo "ok    $*"; }
fail() { failed=$((failed + 1)); echo "FAIL  $*"; }
check() { if eval "$2"; then pass "$1"; else fail "$1"; fi; }

for tool in buildah podman runc curl python3; do
  command -v "$tool" >/dev/null || { fail "$tool missing (scripts/install-test-deps.sh)"; echo "$passed passed, $failed failed"; exit 1; }
done
version=$(python3 -c 'import tomllib; print(tomllib.load(open("Cargo.toml","rb"))["package"]["version"])')
out=$work/out
# Both architectures unless TESSERA_IMAGE_ARCHES=amd64: the arm64 image is inspected and run
# under qemu (binfmt_misc) after the amd64 one.
arches=${TESSERA_IMAGE_ARCHES:-amd64,arm64}
if IMAGE_OUT=$out CARGO_BUILD=${CARGO_BUILD:-1} timeout "$BUILD_LIMIT" scripts/image.sh --arch "$arches" >"$work/build.log" 2>&1; then
  pass "scripts/image.sh built tessera:$version ($(grep '^size:' "$work/build.log" | cut -d';' -f1))"
else
  fail "scripts/image.sh"; sed 's/^/      /' "$work/build.log" | tail -20
  echo "$passed passed, $failed failed"; exit 1
fi
( sleep "$LIMIT" >/dev/null 2>&1; echo "test-image.sh: checks over ${LIMIT}s after the build, giving up" >&2; kill -TERM $$ 2>/dev/null ) &
watchdog=$!
archive=$out/tessera-$version.oci.tar
image=localhost/tessera:$version
p load -q -i "$archive" >/dev/null 2>"$work/load.log" && p tag "$(p images -q | head -n 1)" "$image" 2>>"$work/load.log" \
  && pass "podman load $archive" || { fail "podman load"; sed 's/^/      /' "$work/load.log"; }

# --- what the image is
# inspect_image PODMAN IMAGE LIBS ARCH MACHINE: what the image is, from podman and its layer
# (scripts/lib/image_inspect.py).
inspect_image() {
  local pm=$1 img=$2 libs=$3 arch=$4 machine=$5 line
  "$pm" image inspect "$img" >"$work/inspect.json" 2>/dev/null || echo '[]' >"$work/inspect.json"
  rm -rf "$work/oci"
  "$pm" image save --format oci-dir -o "$work/oci" "$img" >/dev/null 2>&1 || true
  python3 scripts/lib/image_inspect.py "$work/inspect.json" "$work/oci" "$libs" "$version" "$arch" "$machine" \
    >"$work/inspect.out" 2>&1 || true
  while read -r line; do
    case $line in ok*) pass "${line#ok    } ($arch)" ;; FAIL*) fail "${line#FAIL  } ($arch)" ;; *) echo "      $line" ;; esac
  done <"$work/inspect.out"
}
inspect_image p "$image" "$out/tessera-$version.libs.txt" amd64 x86_64
# The probe loads inside the tenants' images, not this one: it must need nothing past glibc 2.17.
if [[ -f $work/probe.so ]] && check=$(scripts/build-probe.sh --check "$work/probe.so" 2>&1); then
  pass "the image's CUDA probe: ${check#ok "$work"/probe.so: }"
else
  fail "the image's CUDA probe: $(head -n 1 <<<"${check:-not found in the image}")"
fi

# --- fake GPUs the way a GPU node provides NVML: the library mounted read-only beside libc (where
# the NVIDIA container toolkit puts libnvidia-ml.so.1); read-only root, loopback port only
fake=target/release/deps/libfake_nvml.so
[[ -f $fake ]] || timeout 600 cargo build --release -q -p fake-nvml >"$work/fake.log" 2>&1 || true
libdir=$(dirname "$(grep -m1 '/libc\.so' "$out/tessera-$version.libs.txt" 2>/dev/null || echo /usr/lib/x86_64-linux-gnu/libc.so.6)")
nvml_at=/usr${libdir#/usr}/libnvidia-ml.so.1
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1]); s.close()')
run_flags=(--ulimit nofile=1024:1024 --ulimit nproc=1024:1024 --read-only)
gpu_flags=(-v "$PWD/$fake:$nvml_at:ro"
  -v "$PWD/crates/fake-nvml/scenarios/demo.yaml:/etc/tessera/fake-nvml.yaml:ro"
  -e TESSERA_FAKE_NVML_SCENARIO=/etc/tessera/fake-nvml.yaml)
if [[ -f $fake ]] && p run -d --name "$name" "${run_flags[@]}" "${gpu_flags[@]}" -p "127.0.0.1:$port:9949" "$image" >"$work/run.log" 2>&1; then
  pass "podman run --read-only -v $fake:$nvml_at:ro -p 127.0.0.1:$port:9949 $image"
else
  fail "podman run with the fake NVML mounted"; sed 's/^/      /' "$work/fake.log" "$work/run.log" 2>/dev/null | tail -20
fi
ready=0
for ((i = 0; i < 120; i++)); do
  if curl -fsS --max-time 2 "http://127.0.0.1:$port/readyz" >/dev/null 2>&1; then ready=1; break; fi
  [[ $(p inspect -f '{{.State.Running}}' "$name" 2>/dev/null) == true ]] || break
  sleep 0.5
done
check "GET /readyz from the host" "((ready))"
curl -fsS --max-time 5 "http://127.0.0.1:$port/metrics" >"$work/metrics.txt" 2>/dev/null || true
gpus=$(grep -c '^gpu_up{' "$work/metrics.txt" || true)
check "GET /metrics from the host: $gpus GPUs up, build info present" \
  "[[ $gpus == 9 ]] && grep -q '^tessera_build_info{' '$work/metrics.txt' && grep -q '^# EOF' '$work/metrics.txt'"
check "the port is published on 127.0.0.1 only" \
  "p port '$name' 2>/dev/null | grep -qx '9949/tcp -> 127.0.0.1:$port'"
p stop -t 10 "$name" >/dev/null 2>&1 || true
code=$(p inspect -f '{{.State.ExitCode}}' "$name" 2>/dev/null || echo none)
p logs "$name" >"$work/gpus.log" 2>&1 || true
check "SIGTERM (podman stop) ends it with exit code 0 (got $code)" "[[ $code == 0 ]] && grep -q 'shutting down' '$work/gpus.log'"
n=$(grep -c 'discovered GPUs' "$work/gpus.log" || true)
check "\"discovered GPUs\" logged once (got $n)" "[[ $n == 1 ]]"
check "no ANSI colour codes in the container's log" "! grep -q \$'\\x1b' '$work/gpus.log'"
[[ $failed == 0 ]] || sed 's/^/      /' "$work/gpus.log" | tail -20

# --- no NVML in the container: one line, exit 1
set +e
p run --name "$name-nonvml" "${run_flags[@]}" "$image" >"$work/nonvml.out" 2>"$work/nonvml.err"
code=$?
set -e
lines=$(wc -l <"$work/nonvml.err")
check "without NVML: exit code 1 (got $code) and one line (got $lines): $(head -c 160 "$work/nonvml.err")" \
  "[[ $code == 1 && $lines == 1 ]] && grep -q 'NVML library not found' '$work/nonvml.err'"

# --- the image has no demo: --demo is refused, not ignored
set +e
p run --name "$name-nodemo" "${run_flags[@]}" "$image" --demo >"$work/nodemo.out" 2>"$work/nodemo.err"
code=$?
set -e
lines=$(wc -l <"$work/nodemo.err")
check "--demo: exit code 2 (got $code) and one line (got $lines): $(head -c 160 "$work/nodemo.err")" \
  "[[ $code == 2 && $lines == 1 ]] && grep -q 'this build has no demo' '$work/nodemo.err'"

# --- the arm64 image (Grace Hopper, Grace Blackwell), emulated: inspected like the amd64 one,
# named with it by the manifest list, and run under qemu against the arm64 fake NVML
if [[ $arches == *arm64* ]]; then
  # shellcheck source=lib/arm64.sh
  . scripts/lib/arm64.sh
  a_archive=$out/tessera-$version-arm64.oci.tar
  a_image=localhost/tessera:$version-arm64
  pa load -q -i "$a_archive" >/dev/null 2>"$work/load-arm64.log" \
    && pa tag "$(pa images -q | head -n 1)" "$a_image" 2>>"$work/load-arm64.log" \
    && pass "podman load $a_archive" || { fail "podman load (arm64)"; sed 's/^/      /' "$work/load-arm64.log"; }
  rm -f "$work/probe.so"
  inspect_image pa "$a_image" "$out/tessera-$version-arm64.libs.txt" arm64 aarch64
  if [[ -f $work/probe.so ]] && check=$(scripts/build-probe.sh --check "$work/probe.so" 2>&1) \
    && [[ $(python3 scripts/lib/elf_machine.py "$work/probe.so") == aarch64 ]]; then
    pass "the arm64 image's CUDA probe: aarch64, ${check#ok "$work"/probe.so: }"
  else
    fail "the arm64 image's CUDA probe: $(head -n 1 <<<"${check:-not found in the image}")"
  fi
  while read -r line; do
    case $line in ok*) pass "${line#ok    }" ;; FAIL*) fail "${line#FAIL  }" ;; *) echo "      $line" ;; esac
  done < <(python3 scripts/lib/image_inspect.py --manifest-list "$out/tessera-$version.multiarch.oci.tar" 2>&1 || true)
  a_fake=$ARM64_OUT/release/libfake_nvml.so
  check "arm64 fake NVML $a_fake is an aarch64 library" \
    "[[ -f '$a_fake' && \$(python3 scripts/lib/elf_machine.py '$a_fake') == aarch64 ]]"
  check "binfmt_misc hands arm64 executables to qemu" arm64_binfmt_ready
  a_port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1]); s.close()')
  # Where the NVIDIA container toolkit puts the driver's library on an arm64 Debian/Ubuntu node.
  a_nvml_at=/usr/lib/aarch64-linux-gnu/libnvidia-ml.so.1
  if pa run -d --name "$name-arm64" "${run_flags[@]}" -v "$a_fake:$a_nvml_at:ro" \
    -v "$PWD/crates/fake-nvml/scenarios/demo.yaml:/etc/tessera/fake-nvml.yaml:ro" \
    -e TESSERA_FAKE_NVML_SCENARIO=/etc/tessera/fake-nvml.yaml \
    -p "127.0.0.1:$a_port:9949" "$a_image" >"$work/run-arm64.log" 2>&1; then
    pass "podman run (arm64, under qemu) -v $a_fake:$a_nvml_at:ro $a_image"
  else
    fail "podman run (arm64) with the arm64 fake NVML mounted"; sed 's/^/      /' "$work/run-arm64.log" | tail -20
  fi
  ready=0
  for ((i = 0; i < 240; i++)); do
    if curl -fsS --max-time 5 "http://127.0.0.1:$a_port/readyz" >/dev/null 2>&1; then ready=1; break; fi
    [[ $(pa inspect -f '{{.State.Running}}' "$name-arm64" 2>/dev/null) == true ]] || break
    sleep 0.5
  done
  check "GET /readyz from the host (arm64)" "((ready))"
  curl -fsS --max-time 10 "http://127.0.0.1:$a_port/metrics" >"$work/metrics-arm64.txt" 2>/dev/null || true
  gpus=$(grep -c '^gpu_up{' "$work/metrics-arm64.txt" || true)
  check "GET /metrics from the host (arm64): $gpus GPUs up, build info present" \
    "[[ $gpus == 9 ]] && grep -q '^tessera_build_info{' '$work/metrics-arm64.txt' && grep -q '^# EOF' '$work/metrics-arm64.txt'"
  pa stop -t 20 "$name-arm64" >/dev/null 2>&1 || true
  code=$(pa inspect -f '{{.State.ExitCode}}' "$name-arm64" 2>/dev/null || echo none)
  pa logs "$name-arm64" >"$work/gpus-arm64.log" 2>&1 || true
  check "SIGTERM (podman stop) ends the arm64 one with exit code 0 (got $code)" \
    "[[ $code == 0 ]] && grep -q 'shutting down' '$work/gpus-arm64.log'"
  [[ $failed == 0 ]] || sed 's/^/      /' "$work/gpus-arm64.log" | tail -20
fi

echo "$passed passed, $failed failed"
((failed == 0))

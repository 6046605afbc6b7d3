#!/usr/bin/env bash
# Builds the container image (scripts/image.sh) and runs it with podman:
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
#   - `--demo`: one line saying this build has no demo, exit code 2.
# podman runs with --storage-driver vfs --runtime runc and explicit ulimits (crun fails on
# hybrid cgroups; runc cannot raise rlimits beyond the host's) and a private storage root, so
# nothing is left behind. Every step is bounded; containers are removed on any exit.
# Last line: "N passed, M failed".
set -euo pipefail
cd "$(dirname "$0")/.."
# The image's binary is a second feature set of the release build (no demo): its first build
# compiles the tessera crate again.
LIMIT=${TESSERA_IMAGE_TEST_TIMEOUT:-600}
passed=0
failed=0
work=$(mktemp -d "${TMPDIR:-/tmp}/tessera-image-test.XXXXXX")
name=tessera-test-$$
p() {
  timeout 60 podman --root "$work/storage" --runroot "$work/run" --storage-driver vfs \
    --runtime runc "$@"
}
cleanup() {
  p rm -f -t 0 "$name" "$name-nonvml" "$name-nodemo" >/dev/null 2>&1 || true
  p rmi -af >/dev/null 2>&1 || true
  rm -rf "$work" 2>/dev/null || true
  [[ -n ${watchdog:-} ]] && kill "$watchdog" 2>/dev/null || true
}
trap cleanup EXIT
trap 'echo "interrupted"; echo "$passed passed, $((failed + 1)) failed"; exit 130' INT TERM
( sleep "$LIMIT" >/dev/null 2>&1; echo "test-image.sh: over ${LIMIT}s, giving up" >&2; kill -TERM $$ 2>/dev/null ) &
watchdog=$!

pass() { passed=$((passed + 1)); echo "ok    $*"; }
fail() { failed=$((failed + 1)); echo "FAIL  $*"; }
check() { if eval "$2"; then pass "$1"; else fail "$1"; fi; }

for tool in buildah podman runc curl python3; do
  command -v "$tool" >/dev/null || { fail "$tool missing (scripts/install-test-deps.sh)"; echo "$passed passed, $failed failed"; exit 1; }
done
version=$(python3 -c 'import tomllib; print(tomllib.load(open("Cargo.toml","rb"))["package"]["version"])')
out=$work/out
if IMAGE_OUT=$out CARGO_BUILD=${CARGO_BUILD:-1} timeout 600 scripts/image.sh >"$work/build.log" 2>&1; then
  pass "scripts/image.sh built tessera:$version ($(grep '^size:' "$work/build.log" | cut -d';' -f1))"
else
  fail "scripts/image.sh"; sed 's/^/      /' "$work/build.log" | tail -20
  echo "$passed passed, $failed failed"; exit 1
fi
archive=$out/tessera-$version.oci.tar
image=localhost/tessera:$version
p load -q -i "$archive" >/dev/null 2>"$work/load.log" && p tag "$(p images -q | head -n 1)" "$image" 2>>"$work/load.log" \
  && pass "podman load $archive" || { fail "podman load"; sed 's/^/      /' "$work/load.log"; }

# --- what the image is
p image inspect "$image" >"$work/inspect.json" 2>/dev/null || echo '[]' >"$work/inspect.json"
p image save --format oci-dir -o "$work/oci" "$image" >/dev/null 2>&1 || true
python3 - "$work/inspect.json" "$work/oci" "$out/tessera-$version.libs.txt" "$version" >"$work/inspect.out" 2>&1 <<'EOF' || true
import json, os, sys, tarfile
inspect, oci, libs_file, version = sys.argv[1:]
img = json.load(open(inspect))[0]
cfg = img["Config"]
labels = cfg.get("Labels") or {}
def say(ok, msg): print(("ok    " if ok else "FAIL  ") + msg)
say(labels.get("org.opencontainers.image.version") == version
    and labels.get("org.opencontainers.image.source", "").startswith("https://")
    and labels.get("org.opencontainers.image.licenses") == "Apache-2.0",
    f"OCI labels version/source/licenses: {version}, {labels.get('org.opencontainers.image.source')}, {labels.get('org.opencontainers.image.licenses')}")
say(cfg.get("User") == "65534:65534", f"image user {cfg.get('User')} (non-root)")
say(cfg.get("Entrypoint") == ["/opt/tessera/tessera"] and not cfg.get("Cmd"), f"entrypoint {cfg.get('Entrypoint')}")
size = img.get("Size", 0)
say(0 < size < 30 * 1000 * 1000, f"image size {size / 1e6:.1f} MB (< 30 MB)")
# The files of the single layer, against what they must be.
index = json.load(open(os.path.join(oci, "index.json")))
def blob(d): return os.path.join(oci, "blobs", *d.split(":"))
manifest = json.load(open(blob(index["manifests"][0]["digest"])))
files = set()
for layer in manifest["layers"]:
    with tarfile.open(blob(layer["digest"])) as t:
        files |= {"/" + m.name.lstrip("./") for m in t.getmembers() if m.isfile()}
libs = {l if l.startswith("/usr/") else "/usr" + l for l in open(libs_file).read().split()}
want = {"/opt/tessera/tessera", "/opt/tessera/libtessera_probe.so",
        "/etc/passwd", "/etc/group",
        "/etc/ssl/certs/ca-certificates.crt"} | libs
say(files == want, f"image files = binary, CUDA probe, ldd's {len(libs)} libraries, CA roots, passwd/group"
    + ("" if files == want else f" (extra {sorted(files - want)}, missing {sorted(want - files)})"))
# The probe as shipped, for the glibc check below.
for layer in manifest["layers"]:
    with tarfile.open(blob(layer["digest"])) as t:
        for m in t.getmembers():
            if m.isfile() and m.name.lstrip("./") == "opt/tessera/libtessera_probe.so":
                with open(os.path.join(oci, "..", "probe.so"), "wb") as f:
                    f.write(t.extractfile(m).read())
EOF
while read -r line; do
  case $line in ok*) pass "${line#ok    }" ;; FAIL*) fail "${line#FAIL  }" ;; *) echo "      $line" ;; esac
done <"$work/inspect.out"
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

echo "$passed passed, $failed failed"
((failed == 0))

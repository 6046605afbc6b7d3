#!/usr/bin/env bash
# Builds tessera's container image from scratch with buildah: no daemon, no base image pulled.
#
#   scripts/image.sh                       # -> target/image/tessera-<version>.oci.tar
#   scripts/image.sh --push docker://registry.example.com/tessera:0.1.0
#   scripts/image.sh --run-demo            # then run it: --demo on http://127.0.0.1:9949/metrics
#
# The image holds the release binary, exactly the shared libraries `ldd` lists for it and for the
# fake NVML library (glibc, libgcc_s, libm, the loader), the CA roots (kube's client trusts them
# for a kubeconfig whose server has a public certificate; in-cluster it uses the service account's
# CA), /etc/passwd and /etc/group for user 65534, an empty /tmp, and libfake_nvml.so beside the
# binary so `--demo` works in the container. The real libnvidia-ml.so.1 is not in it: the NVIDIA
# container runtime mounts the node's driver library at run time.
#
# Layout is merged-/usr like Debian (/lib, /lib64 -> usr/...), so the NVIDIA runtime's ldconfig
# hook and dlopen("libnvidia-ml.so.1") find a driver library mounted into /usr/lib/<triplet>.
#
# Storage is private to this run (vfs under a temp dir): nothing is left in /var/lib/containers.
# Environment: IMAGE_OUT (default target/image), CARGO_BUILD=0 to use existing release artefacts.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
OUT=${IMAGE_OUT:-$ROOT/target/image}
push=""
run_demo=0
while (($#)); do
  case $1 in
    --push) push=${2:?--push needs a destination such as docker://host/tessera:TAG}; shift 2 ;;
    --run-demo) run_demo=1; shift ;;
    *) echo "usage: scripts/image.sh [--push DEST] [--run-demo]" >&2; exit 2 ;;
  esac
done
for tool in buildah ldd python3; do
  command -v "$tool" >/dev/null || { echo "image.sh: $tool is required (scripts/install-test-deps.sh installs it)" >&2; exit 1; }
done

version=$(python3 -c 'import tomllib; print(tomllib.load(open("Cargo.toml","rb"))["package"]["version"])')
revision=$(git rev-parse HEAD 2>/dev/null || echo unknown)
if [[ ${CARGO_BUILD:-1} != 0 ]]; then
  cargo build --release -q -p tessera -p fake-nvml
fi
bin=target/release/tessera
# The copy in deps/ is the one cargo refreshes on every build (see src/demo/mod.rs).
fake=target/release/deps/libfake_nvml.so
# The CUDA probe the cuda-probe overlay copies onto each node for workload pods.
probe=target/release/deps/libtessera_probe.so
for f in "$bin" "$fake" "$probe"; do
  [[ -f $f ]] || { echo "image.sh: $f is missing (cargo build --release -p tessera -p fake-nvml)" >&2; exit 1; }
done

work=$(mktemp -d "${TMPDIR:-/tmp}/tessera-image.XXXXXX")
ctr=""
b() { buildah --root "$work/storage" --runroot "$work/run" --storage-driver vfs "$@"; }
cleanup() {
  [[ -n $ctr ]] && b rm "$ctr" >/dev/null 2>&1 || true
  rm -rf "$work"
}
trap cleanup EXIT

# --- the root filesystem, staged as a plain directory
fs=$work/rootfs
mkdir -p "$fs"/{usr/lib,usr/lib64,etc/ssl/certs,opt/tessera,tmp}
ln -s usr/lib "$fs/lib"
ln -s usr/lib64 "$fs/lib64"
chmod 1777 "$fs/tmp"
# Symbols stripped: the release build keeps them for local debugging, the image has no use for
# them (5 MB of a 30 MB budget).
install -s -m 0755 "$bin" "$fs/opt/tessera/tessera"
install -m 0755 "$fake" "$fs/opt/tessera/libfake_nvml.so"
install -m 0755 "$probe" "$fs/opt/tessera/libtessera_probe.so"

# Every library either ELF file needs, at the path the loader looks it up under (/lib/... and
# /lib64/... land in usr/ through the symlinks above).
libs=$( (ldd "$bin"; ldd "$fake") | awk '/=> \// {print $3; next} /^[ \t]*\/.* \(0x/ {print $1}' | sort -u)
for lib in $libs; do
  dest=$fs/usr${lib#/usr}
  mkdir -p "$(dirname "$dest")"
  cp -L "$lib" "$dest"
done
printf '%s\n' $libs >"$work/libs.txt"

ca=/etc/ssl/certs/ca-certificates.crt
if [[ -f $ca ]]; then
  install -m 0644 "$ca" "$fs/etc/ssl/certs/ca-certificates.crt"
else
  echo "image.sh: note: no $ca here, the image has no CA roots" >&2
fi
printf 'root:x:0:0:root:/:/sbin/nologin\nnobody:x:65534:65534:nobody:/:/sbin/nologin\n' >"$fs/etc/passwd"
printf 'root:x:0:\nnogroup:x:65534:\n' >"$fs/etc/group"
chmod 0644 "$fs/etc/passwd" "$fs/etc/group"

# --- the image
ctr=$(b from --quiet scratch)
b copy --quiet "$ctr" "$fs/" / >/dev/null
created=$(date -u +%Y-%m-%dT%H:%M:%SZ)
b config \
  --entrypoint '["/opt/tessera/tessera"]' \
  --user 65534:65534 \
  --workingdir / \
  --port 9949/tcp \
  --stop-signal SIGTERM \
  --env PATH=/opt/tessera:/usr/bin \
  --os linux --arch amd64 \
  --label org.opencontainers.image.title=tessera \
  --label "org.opencontainers.image.description=GPU node exporter for shared GPUs: per-pod attribution and sharing-mode labels" \
  --label "org.opencontainers.image.version=$version" \
  --label org.opencontainers.image.source=https://github.com/tessera-gpu/tessera \
  --label org.opencontainers.image.licenses=Apache-2.0 \
  --label "org.opencontainers.image.revision=$revision" \
  --label "org.opencontainers.image.created=$created" \
  "$ctr"
tag=localhost/tessera:$version
b commit --quiet --format oci --rm "$ctr" "$tag" >/dev/null
ctr=""
mkdir -p "$OUT"
archive=$OUT/tessera-$version.oci.tar
rm -f "$archive"
b push --quiet "$tag" "oci-archive:$archive:tessera:$version"
if [[ -n $push ]]; then
  b push "$tag" "$push"
fi

size=$(du -sb --apparent-size "$fs" | cut -f1)
cp "$work/libs.txt" "$OUT/tessera-$version.libs.txt"
echo "image tessera:$version -> $archive"
echo "size: $((size / 1024)) KiB uncompressed root filesystem ($(du -b "$archive" | cut -f1 | awk '{printf "%d KiB", $1/1024}') OCI archive); libraries: $(tr '\n' ' ' <"$work/libs.txt")"

if ((run_demo)); then
  command -v podman >/dev/null || { echo "image.sh: --run-demo needs podman" >&2; exit 1; }
  # A storage of its own under target/, so a host podman set up for overlay is not disturbed.
  pm=(podman --root "$OUT/storage" --runroot "$OUT/run" --storage-driver vfs --runtime runc)
  "${pm[@]}" load -q -i "$archive" >/dev/null
  "${pm[@]}" tag "$("${pm[@]}" images -q | head -n 1)" "$tag"
  port=${PORT:-9949}
  echo "tessera --demo in a container: http://127.0.0.1:$port/metrics (Ctrl-C stops it)"
  exec "${pm[@]}" run --rm --read-only --ulimit nofile=1024:1024 --ulimit nproc=1024:1024 \
    -p "127.0.0.1:$port:9949" "$tag" --demo
fi

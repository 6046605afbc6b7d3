#!/usr/bin/env bash
# Builds tessera's container image from scratch with buildah: no daemon, no base image pulled.
#
#   scripts/image.sh                       # -> target/image/tessera-<version>.oci.tar
#   scripts/image.sh --push docker://registry.example.com/tessera:0.1.0
#   scripts/image.sh --run-fake-nvml       # then run it on 9 fake GPUs: http://127.0.0.1:9949/metrics
#   scripts/image.sh --arch amd64,arm64    # both, and a manifest list of the two (see below)
#
# With --arch amd64,arm64 the arm64 image is built beside the amd64 one from scripts/build-arm64.sh's
# cross-built artefacts (Grace Hopper and Grace Blackwell hosts), and a manifest list names both:
# target/image/tessera-<version>.oci.tar stays the amd64 image alone, tessera-<version>-arm64.oci.tar
# is the arm64 one, and tessera-<version>.multiarch.oci.tar holds the list and both images
# (`--push` then pushes the list with both). The arm64 image's libraries are those its binary
# names (readelf's NEEDED, followed), from Debian's arm64 packages (libc6:arm64, libgcc-s1:arm64).
#
# The binary is built without the demo (`--no-default-features`: no crates/demo, no fakes, no
# fake NVML); in the image `--demo` stops with exit code 2. The image holds that release binary,
# exactly the shared libraries `ldd` lists for it (glibc, libgcc_s, libm, the loader), the CUDA
# probe library (built against glibc 2.17 by scripts/build-probe.sh), the CA roots (kube's
# client trusts them for a kubeconfig whose server has a public certificate; in-cluster it uses
# the service account's CA), /etc/passwd and /etc/group for user 65534, and an empty /tmp. The
# real libnvidia-ml.so.1 is not in it: the NVIDIA container runtime mounts the node's driver
# library at run time. `--run-fake-nvml` does the same with the fake NVML (crates/fake-nvml)
# and its demo scenario, read-only: GPUs, no pods.
#
# Layout is merged-/usr like Debian (/lib, /lib64 -> usr/...), so the NVIDIA runtime's ldconfig
# hook and dlopen("libnvidia-ml.so.1") find a driver library mounted into /usr/lib/<triplet>.
#
# Storage is private to this run (vfs under a temp dir): nothing is left in /var/lib/containers.
# Environment: IMAGE_OUT (default target/image), CARGO_BUILD=0 to use existing release artefacts
# (target/release/tessera must then be a --no-default-features build, and target/probe/ hold
# scripts/build-probe.sh's probe). After building the image's binary it builds the default one
# again, so target/release/tessera keeps `--demo` for the scripts that run it.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
OUT=${IMAGE_OUT:-$ROOT/target/image}
push=""
run_fake=0
arches=amd64
while (($#)); do
  case $1 in
    --push) push=${2:?--push needs a destination such as docker://host/tessera:TAG}; shift 2 ;;
    --run-fake-nvml) run_fake=1; shift ;;
    --arch) arches=${2:?--arch needs amd64, arm64 or amd64,arm64}; shift 2 ;;
    *) echo "usage: scripts/image.sh [--arch amd64[,arm64]] [--push DEST] [--run-fake-nvml]" >&2; exit 2 ;;
  esac
done
case $arches in
  amd64) arm64=0 ;;
  amd64,arm64 | arm64,amd64) arm64=1 ;;
  *) echo "image.sh: --arch takes amd64 or amd64,arm64 (the amd64 image is the one the other scripts run)" >&2; exit 2 ;;
esac
for tool in buildah ldd python3; do
  command -v "$tool" >/dev/null || { echo "image.sh: $tool is required (scripts/install-test-deps.sh installs it)" >&2; exit 1; }
done

version=$(python3 -c 'import tomllib; print(tomllib.load(open("Cargo.toml","rb"))["package"]["version"])')
revision=$(git rev-parse HEAD 2>/dev/null || echo unknown)
if [[ ${CARGO_BUILD:-1} != 0 ]]; then
  # fake-nvml is built beside it only to keep the dependency graph of the default build: a cdylib
  # in the graph changes how its dependencies are compiled for thin LTO, and without it cargo
  # compiled ~20 of them (k8s-openapi among them) a second time for this binary.
  cargo build --release -q -p tessera -p fake-nvml --no-default-features
fi
bin=target/release/tessera
# The CUDA probe the cuda-probe overlay copies onto each node for workload pods: built against
# an old glibc, since it loads inside the tenants' images, not this one (scripts/build-probe.sh).
probe=target/probe/libtessera_probe.so
if [[ ${CARGO_BUILD:-1} != 0 ]]; then
  scripts/build-probe.sh
fi
for f in "$bin" "$probe"; do
  [[ -f $f ]] || { echo "image.sh: $f is missing (cargo build --release -p tessera --no-default-features; scripts/build-probe.sh)" >&2; exit 1; }
done
# A probe that asks for a newer glibc than the baseline never ships, however it was built.
scripts/build-probe.sh --check "$probe"
# A string only the demo's code holds: the image never ships a binary with the demo in it.
if grep -qa 'serving the built-in DEMO node' "$bin"; then
  echo "image.sh: $bin has the demo built in; build it with cargo build --release -p tessera --no-default-features" >&2
  exit 1
fi

if ((arm64)); then
  # shellcheck source=lib/arm64.sh
  . scripts/lib/arm64.sh
  if [[ ${CARGO_BUILD:-1} != 0 ]]; then
    scripts/build-arm64.sh >/dev/null
  fi
  arm64_bin=$ARM64_OUT/release/tessera
  arm64_probe=$ARM64_TARGET_DIR/probe/libtessera_probe.so
  for f in "$arm64_bin" "$arm64_probe"; do
    [[ -f $f ]] || { echo "image.sh: $f is missing (scripts/build-arm64.sh)" >&2; exit 1; }
  done
  if grep -qa 'serving the built-in DEMO node' "$arm64_bin"; then
    echo "image.sh: $arm64_bin has the demo built in (scripts/build-arm64.sh builds it without)" >&2
    exit 1
  fi
  command -v aarch64-linux-gnu-strip >/dev/null || { echo "image.sh: aarch64-linux-gnu-strip is required (binutils-aarch64-linux-gnu)" >&2; exit 1; }
fi

work=$(mktemp -d "${TMPDIR:-/tmp}/tessera-image.XXXXXX")
ctr=""
b() { buildah --root "$work/storage" --runroot "$work/run" --storage-driver vfs "$@"; }
cleanup() {
  [[ -n $ctr ]] && b rm "$ctr" >/dev/null 2>&1 || true
  rm -rf "$work"
}
trap cleanup EXIT

# The libraries an arm64 executable or library needs, as the arm64 loader finds them on a Debian
# arm64 machine: its interpreter, then every NEEDED entry, followed, from the multiarch directory.
arm64_libs() {
  local todo=("$1") seen=" " f name dir found
  readelf -lW "$1" | sed -n 's/.*Requesting program interpreter: \(.*\)]/\1/p'
  while ((${#todo[@]})); do
    f=${todo[0]}
    todo=("${todo[@]:1}")
    for name in $(readelf -dW "$f" | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p'); do
      [[ $seen == *" $name "* || $name == ld-linux-* ]] && continue
      seen+="$name "
      found=""
      for dir in /usr/lib/aarch64-linux-gnu /lib/aarch64-linux-gnu; do
        [[ -e $dir/$name ]] && { found=$dir/$name; break; }
      done
      [[ -n $found ]] || { echo "image.sh: $name (needed by $f) not found; install libc6:arm64 libgcc-s1:arm64" >&2; return 1; }
      echo "/usr/lib/aarch64-linux-gnu/$name"
      todo+=("$found")
    done
  done
}

# One image: build_image ARCH BIN PROBE STRIP TAG ARCHIVE REF (the archive's image name).
build_image() {
  local arch=$1 bin=$2 probe=$3 strip=$4 tag=$5 archive=$6 ref=$7 libs lib dest fs=$work/rootfs-$1 size
  # --- the root filesystem, staged as a plain directory
  mkdir -p "$fs"/{usr/lib,usr/lib64,etc/ssl/certs,opt/tessera,tmp}
  ln -s usr/lib "$fs/lib"
  ln -s usr/lib64 "$fs/lib64"
  chmod 1777 "$fs/tmp"
  # Symbols stripped: the release build keeps them for local debugging, the image has no use for
  # them (5 MB of a 30 MB budget).
  install -s --strip-program="$strip" -m 0755 "$bin" "$fs/opt/tessera/tessera"
  install -m 0755 "$probe" "$fs/opt/tessera/libtessera_probe.so"

  # Every library the binary needs, at the path the loader looks it up under (/lib/... and
  # /lib64/... land in usr/ through the symlinks above).
  if [[ $arch == amd64 ]]; then
    libs=$(ldd "$bin" | awk '/=> \// {print $3; next} /^[ \t]*\/.* \(0x/ {print $1}' | sort -u)
  else
    libs=$(arm64_libs "$bin" | sort -u)
  fi
  for lib in $libs; do
    dest=$fs/usr${lib#/usr}
    mkdir -p "$(dirname "$dest")"
    cp -L "$lib" "$dest"
  done
  printf '%s\n' $libs >"$work/libs-$arch.txt"

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
    --os linux --arch "$arch" \
    --label org.opencontainers.image.title=tessera \
    --label "org.opencontainers.image.description=GPU node exporter for shared GPUs: per-pod attribution and sharing-mode labels" \
    --label "org.opencontainers.image.version=$version" \
    --label org.opencontainers.image.source=https://github.com/tessera-gpu/tessera \
    --label org.opencontainers.image.licenses=Apache-2.0 \
    --label "org.opencontainers.image.revision=$revision" \
    --label "org.opencontainers.image.created=$created" \
    "$ctr"
  b commit --quiet --format oci --rm "$ctr" "$tag" >/dev/null
  ctr=""
  rm -f "$archive"
  b push --quiet "$tag" "oci-archive:$archive:$ref"
  size=$(du -sb --apparent-size "$fs" | cut -f1)
  echo "image tessera:$version ($arch) -> $archive"
  echo "size$([[ $arch == amd64 ]] || echo " $arch"): $((size / 1024)) KiB uncompressed root filesystem ($(du -b "$archive" | cut -f1 | awk '{printf "%d KiB", $1/1024}') OCI archive); libraries: $(tr '\n' ' ' <"$work/libs-$arch.txt")"
}

mkdir -p "$OUT"
tag=localhost/tessera:$version
archive=$OUT/tessera-$version.oci.tar
build_image amd64 "$bin" "$probe" strip "$tag" "$archive" "tessera:$version"
cp "$work/libs-amd64.txt" "$OUT/tessera-$version.libs.txt"
if ((arm64)); then
  build_image arm64 "$arm64_bin" "$arm64_probe" aarch64-linux-gnu-strip "$tag-arm64" \
    "$OUT/tessera-$version-arm64.oci.tar" "tessera:$version-arm64"
  cp "$work/libs-arm64.txt" "$OUT/tessera-$version-arm64.libs.txt"
  # The manifest list a mixed-arch cluster pulls: each node gets the image of its architecture.
  list=localhost/tessera-list:$version
  b manifest create "$list" >/dev/null
  b manifest add "$list" "$tag" >/dev/null
  b manifest add "$list" "$tag-arm64" >/dev/null
  multi=$OUT/tessera-$version.multiarch.oci.tar
  rm -f "$multi"
  b manifest push --quiet --all "$list" "oci-archive:$multi:tessera:$version"
  echo "manifest list tessera:$version (amd64, arm64) -> $multi"
  if [[ -n $push ]]; then
    b manifest push --all "$list" "$push"
  fi
elif [[ -n $push ]]; then
  b push "$tag" "$push"
fi

if [[ ${CARGO_BUILD:-1} != 0 ]]; then
  # Back to the default build (cached: no recompilation), with the demo and the fake NVML.
  cargo build --release -q -p tessera -p fake-nvml
fi

if ((run_fake)); then
  command -v podman >/dev/null || { echo "image.sh: --run-fake-nvml needs podman" >&2; exit 1; }
  fake=target/release/deps/libfake_nvml.so
  [[ -f $fake ]] || { echo "image.sh: $fake is missing (cargo build --release -p fake-nvml)" >&2; exit 1; }
  # A storage of its own under target/, so a host podman set up for overlay is not disturbed.
  pm=(podman --root "$OUT/storage" --runroot "$OUT/run" --storage-driver vfs --runtime runc)
  "${pm[@]}" load -q -i "$archive" >/dev/null
  "${pm[@]}" tag "$("${pm[@]}" images -q | head -n 1)" "$tag"
  port=${PORT:-9949}
  echo "tessera on 9 fake GPUs in a container: http://127.0.0.1:$port/metrics (Ctrl-C stops it)"
  # Beside libc, where the NVIDIA container toolkit puts the driver's library; read-only, like it.
  libdir=$(dirname "$(grep -m1 '/libc\.so' "$OUT/tessera-$version.libs.txt")")
  exec "${pm[@]}" run --rm --read-only --ulimit nofile=1024:1024 --ulimit nproc=1024:1024 \
    -v "$ROOT/$fake:/usr${libdir#/usr}/libnvidia-ml.so.1:ro" \
    -v "$ROOT/crates/fake-nvml/scenarios/demo.yaml:/etc/tessera/fake-nvml.yaml:ro" \
    -e TESSERA_FAKE_NVML_SCENARIO=/etc/tessera/fake-nvml.yaml \
    -p "127.0.0.1:$port:9949" "$tag" --kubelet.enabled=false --kube.enabled=false
fi

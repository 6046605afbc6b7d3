#!/usr/bin/env bash
# The node tier's two images, built from the host's static busybox with buildah (no registry, no
# base image): localhost/tessera-test/busybox:1, whose processes stand in for CUDA clients, and
# localhost/tessera-test/pause:1, the pod sandbox (busybox sleeping for ever). The busybox image
# also holds /bin/nvidia-cuda-mps-server (see below). And the probe's tenants:
# localhost/tessera-test/tenant:1, the busybox image plus cuda-tenant.c (a stand-in CUDA
# process that loads CUDA_INJECTION64_PATH as the driver does), the glibc libraries it, the
# probe and the stand-in CUPTI need, and the stand-in CUPTI at a CUDA image's path; and
# localhost/tessera-test/tenant-nocupti:1, the same without CUPTI. The probe itself is not in
# them: the admission policy mounts it from the node.
#
#   images.sh OUT_DIR      # -> OUT_DIR/{busybox,pause,tenant,tenant-nocupti}.tar (OCI archives)
#
# FAKE_CUPTI and PROBE name the stand-in CUPTI and the probe (default: scripts/build-probe.sh's,
# in target/probe); the probe is read only for the libraries it needs.
set -euo pipefail
out=${1:?output folder}
mkdir -p "$out"
busybox=$(command -v busybox || true)
if [ -z "$busybox" ] || ! file -L "$busybox" | grep -q 'statically linked'; then
  echo "images.sh: a static busybox is required (apt-get install busybox-static)" >&2
  exit 1
fi
work=$(mktemp -d "${TMPDIR:-/tmp}/tessera-node-images.XXXXXX")
ctr=""
b() { buildah --root "$work/storage" --runroot "$work/run" --storage-driver vfs "$@"; }
cleanup() {
  [ -n "$ctr" ] && b rm "$ctr" >/dev/null 2>&1 || true
  b rmi -af >/dev/null 2>&1 || true
  rm -rf "$work"
}
trap cleanup EXIT

fs=$work/rootfs
mkdir -p "$fs/bin" "$fs/tmp"
chmod 1777 "$fs/tmp"
install -m 0755 "$busybox" "$fs/bin/busybox"
for applet in sh sleep cat echo kill ls; do ln -s busybox "$fs/bin/$applet"; done
# Stands in for NVIDIA's MPS server in the MPS control daemon's pod: tessera knows the server by
# its process name, which a script gets from its file name.
cat >"$fs/bin/nvidia-cuda-mps-server" <<'SH'
#!/bin/sh
trap 'exit 0' TERM
while :; do sleep 1; done
SH
chmod 0755 "$fs/bin/nvidia-cuda-mps-server"

image() {
  local name=$1 cmd=$2
  ctr=$(b from --quiet scratch)
  b copy --quiet "$ctr" "$fs/" / >/dev/null
  b config --cmd "$cmd" --env PATH=/bin --os linux --arch amd64 "$ctr"
  b commit --quiet --format oci --rm "$ctr" "localhost/tessera-test/$name:1" >/dev/null
  ctr=""
  rm -f "$out/$name.tar"
  b push --quiet "localhost/tessera-test/$name:1" "oci-archive:$out/$name.tar:localhost/tessera-test/$name:1"
}
image busybox '["/bin/sh"]'

# The tenants. Each library keeps the path the host's loader found it at, so the image's
# loader finds it the same way; the probe's and CUPTI's needs are glibc's own
# (scripts/build-probe.sh checks that), which cuda-tenant's already bring.
root=$(cd "$(dirname "$0")/../.." && pwd)
cupti=${FAKE_CUPTI:-$root/target/probe/libfake_cupti.so}
probe=${PROBE:-$root/target/probe/libtessera_probe.so}
for f in "$cupti" "$probe"; do
  [ -f "$f" ] || { echo "images.sh: $f is missing (scripts/build-probe.sh builds it)" >&2; exit 1; }
done
mkdir -p "$fs/usr/local/bin"
gcc -O2 -Wall -Werror -o "$fs/usr/local/bin/cuda-tenant" "$(dirname "$0")/cuda-tenant.c" -ldl
ldd "$fs/usr/local/bin/cuda-tenant" "$probe" "$cupti" | grep -o '/[^ ]*' | grep -v ':$' | sort -u | while read -r lib; do
  mkdir -p "$fs$(dirname "$lib")"
  cp -L "$lib" "$fs$lib"
done
image tenant-nocupti '["/usr/local/bin/cuda-tenant"]'
mkdir -p "$fs/usr/local/cuda/extras/CUPTI/lib64"
install -m 0755 "$cupti" "$fs/usr/local/cuda/extras/CUPTI/lib64/libcupti.so"
image tenant '["/usr/local/bin/cuda-tenant"]'
# Busybox as PID 1 ignores SIGTERM; the sandbox is killed, never asked.
image pause '["/bin/sleep", "2147483647"]'
echo "images.sh: $(ls "$out")"

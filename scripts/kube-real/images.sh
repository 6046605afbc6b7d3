#!/usr/bin/env bash
# The node tier's two images, built from the host's static busybox with buildah (no registry, no
# base image): localhost/tessera-test/busybox:1, whose processes stand in for CUDA clients, and
# localhost/tessera-test/pause:1, the pod sandbox (busybox sleeping for ever). The busybox image
# also holds /bin/nvidia-cuda-mps-server (see below).
#
#   images.sh OUT_DIR      # -> OUT_DIR/busybox.tar OUT_DIR/pause.tar (OCI archives)
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
# Busybox as PID 1 ignores SIGTERM; the sandbox is killed, never asked.
image pause '["/bin/sleep", "2147483647"]'
echo "images.sh: $(ls "$out")"

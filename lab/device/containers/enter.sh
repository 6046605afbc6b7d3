#!/bin/sh
# Runs inside a tenant's new PID, mount and cgroup namespaces (driver.py starts it under
# `unshare --pid --fork --mount --cgroup --propagation private`), as PID 1 there: mounts what
# the chart's admission policy mounts, sets what it sets, and execs the tenant.
#
#   enter.sh SOCKET_DIR LIBRARY_DIR CMD...
#
# The policy (deploy/overlays/cuda-probe/mutatingadmissionpolicy.yaml): hostPath /run/tessera
# at /run/tessera read-only, hostPath /opt/tessera/lib at /opt/tessera/lib read-only,
# CUDA_INJECTION64_PATH=/opt/tessera/lib/libtessera_probe.so, and nothing else: the probe finds
# the socket at its default path.
set -e
sock=$1 lib=$2
shift 2
# This PID namespace's own /proc, as a container's: the tenant sees itself as PID 1.
mount -t proc proc /proc
mount --bind "$sock" /run/tessera
mount -o remount,bind,ro /run/tessera
mount --bind "$lib" /opt/tessera/lib
mount -o remount,bind,ro /opt/tessera/lib
# CTR_PLANT=no-env plants a fault: the policy's variable missing.
[ "${CTR_PLANT:-}" = no-env ] || export CUDA_INJECTION64_PATH=/opt/tessera/lib/libtessera_probe.so
unset TESSERA_PROBE_SOCKET CTR_PLANT
# A container of another user (ENTER_UID): the socket's mode decides whether its probe may
# connect.
if [ -n "${ENTER_UID:-}" ]; then
  u=$ENTER_UID
  unset ENTER_UID
  exec setpriv --reuid="$u" --regid="$u" --clear-groups "$@"
fi
exec "$@"

#!/usr/bin/env bash
# Installs what the test suite needs beyond the Rust toolchain, when it is missing:
# Debian's prometheus (prometheus + promtool), curl and wrk, and kubernetes-validate from PyPI;
# buildah, podman, runc and prometheus-alertmanager, and helm-python-sdk (tests/helm/requirements.txt);
# chromium (renders the advisor's HTML report headless); victoria-metrics (vmagent, vmalert);
# kube-apiserver, etcd (and kubectl if missing) built with Go for scripts/test-kube-real.sh;
# containerd, runc, the CNI plugins and busybox-static, and the kubelet, for scripts/test-kube-node.sh;
# binutils, ziglang and cargo-zigbuild for the CUDA probe's old-glibc build (scripts/build-probe.sh).
# Debian's Rust with the arm64 standard library, the aarch64 cross gcc and qemu for the arm64 stage.
# cargo-fuzz (crates.io) for the fuzz stage.
set -euo pipefail
cd "$(dirname "$0")/.."
sudo_cmd=""
[ "$(id -u)" -eq 0 ] || sudo_cmd="sudo"
if ! command -v promtool >/dev/null || ! command -v prometheus >/dev/null || ! command -v curl >/dev/null \
  || ! command -v wrk >/dev/null || ! command -v chromium >/dev/null; then
  $sudo_cmd apt-get update -q
  DEBIAN_FRONTEND=noninteractive $sudo_cmd apt-get install -y -q prometheus curl wrk chromium
fi
# Debian's prometheus package starts a system service; the tests run their own.
$sudo_cmd systemctl stop prometheus 2>/dev/null || true
if ! command -v kubernetes-validate >/dev/null || ! python3 -c 'import yaml' 2>/dev/null; then
  python3 -m pip install -q -r tests/prometheus/requirements.txt
fi
# --- install on a cluster: image build/run, Alertmanager, Helm rendering
if ! command -v buildah >/dev/null || ! command -v podman >/dev/null || ! command -v runc >/dev/null \
  || ! command -v prometheus-alertmanager >/dev/null || ! command -v amtool >/dev/null; then
  $sudo_cmd apt-get update -q
  DEBIAN_FRONTEND=noninteractive $sudo_cmd apt-get install -y -q buildah podman runc prometheus-alertmanager
fi
# Debian's prometheus-alertmanager starts a system service; the tests run their own.
$sudo_cmd systemctl stop prometheus-alertmanager 2>/dev/null || true
if ! python3 -c 'import helm_python, kubernetes_validate, yaml' 2>/dev/null; then
  python3 -m pip install -q -r tests/helm/requirements.txt
fi
# ---
# --- fleet at scale: VictoriaMetrics, vmagent and vmalert beside Prometheus
# (xz unpacks the replayed fleet's captures, tests/data/fleet-captures-16.tar.xz.)
if ! command -v victoria-metrics >/dev/null || ! command -v vmagent >/dev/null || ! command -v vmalert >/dev/null \
  || ! command -v xz >/dev/null; then
  $sudo_cmd apt-get update -q
  DEBIAN_FRONTEND=noninteractive $sudo_cmd apt-get install -y -q victoria-metrics xz-utils
fi
# Debian's victoria-metrics starts a system service; scripts/fleet.sh runs its own.
$sudo_cmd systemctl stop victoria-metrics 2>/dev/null || true
# ---
# --- a real Kubernetes API server: kube-apiserver and etcd built from the Go module
# proxy with the machine's Go (scripts/kube-real/build.sh), cached in ~/.cache/tessera-k8s/<version>;
# openssl makes the control plane's certificates. kubectl, where the machine has none, is built
# from the same module and linked onto the PATH: the manifest tests need it too.
if ! command -v openssl >/dev/null; then
  $sudo_cmd apt-get update -q
  DEBIAN_FRONTEND=noninteractive $sudo_cmd apt-get install -y -q openssl
fi
for version in ${TESSERA_KUBE_VERSIONS:-v1.37.2}; do
  if command -v kubectl >/dev/null; then
    scripts/kube-real/build.sh "$version"
  else
    scripts/kube-real/build.sh "$version" --kubectl
    $sudo_cmd ln -sf "${TESSERA_K8S_CACHE:-$HOME/.cache/tessera-k8s}/$version/bin/kubectl" /usr/local/bin/kubectl
  fi
done
# --- a real node (scripts/test-kube-node.sh): containerd and runc run its pods, the
# CNI loopback plugin gives them a network namespace, a static busybox makes their image; the
# kubelet is built like kube-apiserver. Where installing containerd starts its service, it is
# stopped: the tier runs its own.
if ! command -v containerd >/dev/null || ! command -v ctr >/dev/null || ! command -v runc >/dev/null \
  || ! command -v buildah >/dev/null || [ ! -x /usr/lib/cni/loopback ] \
  || ! file -L "$(command -v busybox || echo /nonexistent)" 2>/dev/null | grep -q 'statically linked'; then
  had_containerd=$(command -v containerd || true)
  $sudo_cmd apt-get update -q
  DEBIAN_FRONTEND=noninteractive $sudo_cmd apt-get install -y -q containerd runc buildah \
    containernetworking-plugins busybox-static file
  [ -n "$had_containerd" ] || $sudo_cmd systemctl stop containerd 2>/dev/null || true
fi
for version in ${TESSERA_KUBE_NODE_VERSION:-v1.37.2}; do
  scripts/kube-real/build.sh "$version" --kubelet
done
# ---
# --- arm64, emulated (scripts/build-arm64.sh, scripts/test-arm64.sh, the image's arm64 half):
# Debian's Rust with the arm64 standard library (the rustup toolchain stays first on the PATH for
# x86_64), the cross linker, qemu-user for the test binaries, and qemu-user-static's binfmt_misc
# entry for the arm64 processes they start and for podman running the arm64 image; libc6:arm64
# and libgcc-s1:arm64 are the loader and libraries those processes and the arm64 image use.
arm64_pkgs="rustc-web cargo-web libstd-rust-web-dev:arm64 gcc-aarch64-linux-gnu libc6-dev-arm64-cross
  qemu-user qemu-user-static binfmt-support libc6:arm64 libgcc-s1:arm64"
# shellcheck disable=SC2086
if ! dpkg --print-foreign-architectures | grep -qx arm64 || ! dpkg -s $arm64_pkgs >/dev/null 2>&1; then
  $sudo_cmd dpkg --add-architecture arm64
  $sudo_cmd apt-get update -q
  DEBIAN_FRONTEND=noninteractive $sudo_cmd apt-get install -y -q $arm64_pkgs
fi
[ -e /proc/sys/fs/binfmt_misc/register ] || $sudo_cmd mount -t binfmt_misc binfmt_misc /proc/sys/fs/binfmt_misc
[ -e /proc/sys/fs/binfmt_misc/qemu-aarch64 ] || $sudo_cmd update-binfmts --enable qemu-aarch64
# ---
# --- the CUDA probe that loads in old tenant images (scripts/build-probe.sh): zig
# links it against glibc 2.17 through cargo-zigbuild, both from PyPI; objdump checks it.
if ! command -v objdump >/dev/null; then
  $sudo_cmd apt-get update -q
  DEBIAN_FRONTEND=noninteractive $sudo_cmd apt-get install -y -q binutils
fi
if ! command -v cargo-zigbuild >/dev/null || ! python3 -m ziglang version >/dev/null 2>&1; then
  python3 -m pip install -q -r tests/probe/requirements.txt
fi
# --- cargo-fuzz for the fuzz stage (scripts/fuzz.sh installs it too when run alone): built here,
# where the test suite runs this script beside its first builds, not in the lane that fuzzes.
if ! cargo fuzz --version >/dev/null 2>&1; then
  cargo install cargo-fuzz --locked
fi
# ---
if ! command -v kubectl >/dev/null; then
  echo "kubectl (with kustomize) is required for the manifest tests" >&2
  exit 1
fi

#!/usr/bin/env bash
# The real-node tier: etcd + kube-apiserver (scripts/kube-real/control-plane.sh),
# containerd + runc and a kubelet (scripts/kube-real/node.sh), the device-plugin fixture, and
#   - tests/kube_node_e2e.rs: pods holding GPUs (exclusive, time-sliced, MPS, MIG), each QoS
#     class, an init container, a restart in place, a deletion, kubelet and containerd restarts,
#     tessera joining them through the real pod-resources API and real cgroups;
#   - tessera's image run from the chart's rendered pod spec on that node, and scraped;
#   - the CUDA probe as deploy/overlays/cuda-probe installs it: tessera's pod from the overlay's
#     DaemonSet (its socket, the library's init container), the overlay's admission policy run
#     by the API server on tenant pods of cuda-tenant.c against the stand-in CUPTI.
# Needs root (it runs a kubelet). It leaves the machine as it found it, and checks that itself:
# sysctls, mounts, iptables, cgroups and host paths before and after (machine-state.sh).
# Ends with "test_kube_node: N passed, N failed" and the stage time.
#
#   scripts/test-kube-node.sh [cargo test filter]   (Kubernetes $TESSERA_KUBE_NODE_VERSION or v1.37.2)
#   TESSERA_KUBE_PLANT=pid-from-frame scripts/test-kube-node.sh probe_cases::probed
#       a planted fault: scripts/kube-real/plants/NAME.patch applied to the source for this run
#       (tessera's image is built from it) and taken out again at the end; the run passes only
#       if the tests fail. By hand, not in CI: the image's release build is redone twice.
set -euo pipefail
cd "$(dirname "$0")/.."
started=$(date +%s)
kube_version=${TESSERA_KUBE_NODE_VERSION:-v1.37.2}
cache=${TESSERA_K8S_CACHE:-$HOME/.cache/tessera-k8s}
bin=$cache/$kube_version/bin
filter=("$@")
passed=0 failed=0
state=""
phase=none
result() {
  echo "kube-node: stage time $(( $(date +%s) - started )) s"
  echo "test_kube_node: $passed passed, $failed failed"
}
give_up() {
  echo "kube-node: $*" >&2
  failed=$((failed + 1))
  result
  exit 1
}

[ "$(id -u)" -eq 0 ] || give_up "needs root: it runs a kubelet and containers"
plant=${TESSERA_KUBE_PLANT:-}
unplant() {
  if [ -n "$plant" ] && git apply -R --check "scripts/kube-real/plants/$plant.patch" 2>/dev/null; then
    git apply -R "scripts/kube-real/plants/$plant.patch"
  fi
}
if [ -n "$plant" ]; then
  [ -f "scripts/kube-real/plants/$plant.patch" ] || give_up "no planted fault scripts/kube-real/plants/$plant.patch"
  git apply "scripts/kube-real/plants/$plant.patch" || give_up "the planted fault $plant does not apply"
  trap unplant EXIT
fi
for tool in containerd runc ctr buildah busybox unshare nsenter go curl python3 gcc ldd; do
  command -v "$tool" >/dev/null || give_up "$tool is missing (scripts/install-test-deps.sh installs it)"
done
[ -e /sys/fs/cgroup/cpu/kubepods ] || [ -e /sys/fs/cgroup/unified/kubepods ] || [ -e /sys/fs/cgroup/kubepods ] \
  && give_up "a kubelet's cgroups exist already: is a node running on this machine?"
# One node per machine: the kubelet's device-plugin path is fixed.
exec 9<"$0"
flock -n 9 || give_up "another node tier runs on this machine"

# Binaries first (the kubelet's first build takes minutes), then the test binary, so that the
# node runs only as long as the tests.
want=(--kubelet)
command -v kubectl >/dev/null || want+=(--kubectl)
scripts/kube-real/build.sh "$kube_version" "${want[@]}"
command -v kubectl >/dev/null || export PATH=$bin:$PATH
# The device-plugin fixture is a package of the wrapper module build.sh made: the kubelet's own
# API package and gRPC, already in its module cache.
mkdir -p "$cache/$kube_version/mod/tessera-device-plugin"
cp scripts/kube-real/device-plugin/main.go "$cache/$kube_version/mod/tessera-device-plugin/"
(cd "$cache/$kube_version/mod" && GOFLAGS=-mod=mod CGO_ENABLED=0 go build -trimpath -buildvcs=false \
  -o "$bin/tessera-device-plugin" ./tessera-device-plugin)
cargo test -q --test kube_node_e2e --no-run

state=$(mktemp -d "${TMPDIR:-/tmp}/tessera-kube-node.XXXXXX")
scripts/kube-real/machine-state.sh snapshot "$state/before"
# tessera's image as users build it (scripts/image.sh: the release build without the demo; the
# release build is the one test.sh's later stages use).
if ! IMAGE_OUT=$state/image scripts/image.sh >"$state/image.log" 2>&1; then
  tail -20 "$state/image.log" >&2
  give_up "scripts/image.sh failed"
fi

teardown() {
  local rc=$?
  trap - EXIT
  if [ "$phase" != none ]; then
    export KUBECONFIG=$state/admin.kubeconfig
    if [ "$phase" = node ]; then
      # Pods first, so that the kubelet stops their containers and unmounts their volumes.
      timeout 90 kubectl delete pods --all --all-namespaces --grace-period=1 --wait=true >/dev/null 2>&1 || true
      scripts/kube-real/node.sh stop "$state" || true
    fi
    scripts/kube-real/control-plane.sh stop "$state" || true
    scripts/kube-real/machine-state.sh snapshot "$state/after"
    if scripts/kube-real/machine-state.sh compare "$state/before" "$state/after"; then
      passed=$((passed + 1)); echo "ok    the machine's sysctls, mounts, iptables, cgroups and paths are as before"
    else
      failed=$((failed + 1)); echo "FAIL  the machine changed (above); state kept in $state"
    fi
  fi
  [ "$rc" -eq 0 ] || failed=$((failed + 1))
  result
  if [ -n "$plant" ]; then
    unplant
    # Caught only by the tests' own checks, not by a node that failed to come up.
    if [ "${tests_failed:-0}" -gt 0 ]; then
      echo "kube-node: the planted fault $plant was caught ($tests_failed tests failed)"
      rm -rf "$state"
      exit 0
    fi
    echo "kube-node: the planted fault $plant was NOT caught: these checks cannot fail on it"
    exit 1
  fi
  # Logs are kept on failure only.
  if [ "$failed" -eq 0 ] && [ -n "$state" ]; then rm -rf "$state"; fi
  exit $((failed > 0))
}
trap teardown EXIT

phase=control-plane
scripts/kube-real/control-plane.sh start "$state" "$bin" "$kube_version"
export KUBECONFIG=$state/admin.kubeconfig
# The chart as a user of this node would set it: the image just built, no RuntimeClass (runc
# plays the NVIDIA runtime's part), the kubelet's root where this node has it, a free port.
pod_port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
tessera_version=$(python3 -c 'import tomllib; print(tomllib.load(open("Cargo.toml","rb"))["package"]["version"])')
scripts/helm-template.py --name tessera --namespace tessera \
  --set image.repository=localhost/tessera --set "image.tag=$tessera_version" --set runtimeClassName= \
  --set "kubelet.podResourcesDir=$state/node/kubelet/pod-resources" --set "port=$pod_port" \
  >"$state/chart.yaml" 2>"$state/chart-notes.txt" || { cat "$state/chart-notes.txt" >&2; exit 1; }
python3 - "$state/chart.yaml" >"$state/tessera-pod-template.json" <<'PY'
import json, sys, yaml
docs = [d for d in yaml.safe_load_all(open(sys.argv[1])) if d]
print(json.dumps(next(d for d in docs if d["kind"] == "DaemonSet")["spec"]["template"]))
PY
# The CUDA probe's overlay as users apply it; tests/kube_node/probe.rs takes its DaemonSet's pod
# template and its MutatingAdmissionPolicy from here.
kubectl kustomize deploy/overlays/cuda-probe >"$state/cuda-probe.yaml"
# tessera's identity: the chart's service account and ClusterRole, its token as a kubeconfig.
kubectl create namespace tessera >/dev/null
kubectl apply --server-side -f "$state/chart.yaml" >/dev/null
token=$(kubectl create token tessera -n tessera --duration=2h)
cat >"$state/tessera.kubeconfig" <<KC
apiVersion: v1
kind: Config
current-context: tessera
clusters: [{name: real, cluster: {server: "$(kubectl config view --minify -o jsonpath='{.clusters[0].cluster.server}')", certificate-authority: "$state/pki/ca.crt"}}]
contexts: [{name: tessera, context: {cluster: real, user: tessera}}]
users: [{name: tessera, user: {token: "$token"}}]
KC
# The same identity for tessera's own pod, the CA inline (the pod sees none of this folder).
sed "s|certificate-authority: \"$state/pki/ca.crt\"|certificate-authority-data: \"$(base64 -w0 "$state/pki/ca.crt")\"|" \
  "$state/tessera.kubeconfig" >"$state/tessera-pod.kubeconfig"

# The tenant image carries the probe and the stand-in CUPTI as the probe stages build them; a
# clean checkout has neither yet at this stage.
if [[ ! -f target/probe/libtessera_probe.so || ! -f target/probe/libfake_cupti.so ]]; then
  scripts/build-probe.sh >/dev/null
fi
scripts/kube-real/images.sh "$state/images"
phase=node
scripts/kube-real/node.sh start "$state" "$bin" "$state/images"
echo "TESSERA_POD_PORT=$pod_port" >>"$state/node/env"
echo "TESSERA_IMAGE=localhost/tessera:$tessera_version" >>"$state/node/env"
# image.sh names the archive's image tessera:<version>, which the CRI reads as
# docker.io/library/tessera and then cannot find. Renamed to the chart's localhost/tessera in a
# namespace the CRI does not watch, then loaded for it.
ctr_node() { ctr --address "$state/node/containerd/containerd.sock" "$@"; }
ctr_node -n tessera-import images import "$state/image/tessera-$tessera_version.oci.tar" >/dev/null
ctr_node -n tessera-import images tag "tessera:$tessera_version" "localhost/tessera:$tessera_version" >/dev/null
ctr_node -n tessera-import images export "$state/image/tessera.tar" "localhost/tessera:$tessera_version"
ctr_node -n k8s.io images import "$state/image/tessera.tar" >/dev/null

log=$state/cargo-test.log
export TESSERA_KUBE_NODE_DIR=$state
if cargo test -q --test kube_node_e2e -- --ignored --test-threads=1 --nocapture "${filter[@]}" 2>&1 | tee "$log"; then :; fi
p=$(sed -n 's/^test result: .* \([0-9]*\) passed; \([0-9]*\) failed.*/\1/p' "$log" | tail -1)
f=$(sed -n 's/^test result: .* \([0-9]*\) passed; \([0-9]*\) failed.*/\2/p' "$log" | tail -1)
[ -n "$p" ] || { p=0; f=1; }
[ -z "$(sed -n 's/^test result: .* \([0-9]*\) passed.*/\1/p' "$log")" ] || tests_failed=$f
passed=$((passed + p)) failed=$((failed + f))

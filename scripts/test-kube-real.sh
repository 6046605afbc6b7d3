#!/usr/bin/env bash
# The real-API-server tier: for each Kubernetes version, etcd + kube-apiserver
# (scripts/kube-real/), the chart rendered by the Helm engine and by kustomize and applied, then
#   - tests/kube_real_e2e.rs: the pod reflector, DRA claims and the RBAC rules (tessera with the
#     token of the rendered service account), the RBAC test once per rendering;
#   - tests/kube-real/check_admission.py: the cuda-probe MutatingAdmissionPolicy's CEL.
# Ends with "test_kube_real: N passed, N failed".
#
#   scripts/test-kube-real.sh [vX.Y.Z ...]     (default: $TESSERA_KUBE_VERSIONS or v1.37.2)
set -euo pipefail
cd "$(dirname "$0")/.."
read -r -a versions <<<"${*:-${TESSERA_KUBE_VERSIONS:-v1.37.2}}"
cache=${TESSERA_K8S_CACHE:-$HOME/.cache/tessera-k8s}
passed=0 failed=0
state=""
stop() {
  [ -n "$state" ] && scripts/kube-real/control-plane.sh stop "$state" || true
}
trap stop EXIT

# tessera's identity: the rendered service account's token, as its pod would mount it.
write_kubeconfig() {
  local out=$1 ns=$2 sa=$3 token
  token=$(kubectl create token "$sa" -n "$ns" --duration=2h)
  local server
  server=$(kubectl config view --minify -o jsonpath='{.clusters[0].cluster.server}')
  cat >"$out" <<KC
apiVersion: v1
kind: Config
current-context: tessera
clusters: [{name: real, cluster: {server: "$server", certificate-authority: "$state/pki/ca.crt"}}]
contexts: [{name: tessera, context: {cluster: real, user: $sa}}]
users: [{name: $sa, user: {token: "$token"}}]
KC
}

# One test binary run; its "test result" line adds to the totals.
run_cargo() {
  local log
  log=$(mktemp)
  # --nocapture: the measured figures (late-0's delay, verbs removed) reach the log.
  if cargo test -q --test kube_real_e2e -- --ignored --test-threads=1 --nocapture "$@" 2>&1 | tee "$log"; then :; fi
  local p f
  p=$(sed -n 's/^test result: .* \([0-9]*\) passed; \([0-9]*\) failed.*/\1/p' "$log" | tail -1)
  f=$(sed -n 's/^test result: .* \([0-9]*\) passed; \([0-9]*\) failed.*/\2/p' "$log" | tail -1)
  [ -n "$p" ] || { p=0; f=1; }
  passed=$((passed + p)) failed=$((failed + f))
  rm -f "$log"
}

cargo test -q --test kube_real_e2e --no-run
for version in "${versions[@]}"; do
  echo "== kube-real: Kubernetes $version"
  bin=$cache/$version/bin
  want=()
  command -v kubectl >/dev/null || want=(--kubectl)
  scripts/kube-real/build.sh "$version" "${want[@]}"
  command -v kubectl >/dev/null || export PATH=$bin:$PATH
  state=$(mktemp -d "${TMPDIR:-/tmp}/tessera-kube-real.XXXXXX")
  scripts/kube-real/control-plane.sh start "$state" "$bin" "$version"
  export KUBECONFIG=$state/admin.kubeconfig

  # The chart through the Helm engine, DRA on (every rule the chart can grant).
  kubectl create namespace tessera-helm >/dev/null
  scripts/helm-template.py --name tessera-helm --namespace tessera-helm --set dra.enabled=true \
    >"$state/helm.yaml" 2>"$state/helm-notes.txt" || { cat "$state/helm-notes.txt" >&2; exit 1; }
  kubectl apply --server-side -f "$state/helm.yaml" >/dev/null
  write_kubeconfig "$state/tessera-helm.kubeconfig" tessera-helm tessera-helm
  # kustomize's DRA overlay: the same rules, its own namespace, role and account.
  kubectl kustomize deploy/overlays/dra >"$state/kustomize.yaml"
  kubectl apply --server-side -f "$state/kustomize.yaml" >/dev/null
  write_kubeconfig "$state/tessera-kustomize.kubeconfig" tessera tessera
  echo "kube-real: Helm and kustomize renderings applied"

  export TESSERA_KUBE_REAL_DIR=$state
  echo "-- tessera with the Helm rendering's identity"
  TESSERA_KUBE_REAL_ROLE=tessera-helm TESSERA_KUBE_REAL_KUBECONFIG=$state/tessera-helm.kubeconfig run_cargo
  echo "-- RBAC with the kustomize rendering's identity"
  TESSERA_KUBE_REAL_ROLE=tessera TESSERA_KUBE_REAL_KUBECONFIG=$state/tessera-kustomize.kubeconfig \
    run_cargo --exact kube_real::rbac::the_charts_rules_are_exactly_what_tessera_needs
  echo "-- the cuda-probe MutatingAdmissionPolicy"
  log=$(mktemp)
  python3 tests/kube-real/check_admission.py 2>&1 | tee "$log" || true
  p=$(sed -n 's/^check_admission: \([0-9]*\) passed, \([0-9]*\) failed$/\1/p' "$log")
  f=$(sed -n 's/^check_admission: \([0-9]*\) passed, \([0-9]*\) failed$/\2/p' "$log")
  [ -n "$p" ] || { p=0; f=1; }
  passed=$((passed + p)) failed=$((failed + f))
  rm -f "$log"
  stop
  rm -rf "$state"
  state=""
done
echo "test_kube_real: $passed passed, $failed failed"
[ "$failed" -eq 0 ]

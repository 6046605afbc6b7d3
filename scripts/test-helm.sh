#!/usr/bin/env bash
# The Helm chart (deploy/helm/tessera), offline: helm-python-sdk renders and lints it (Helm v4
# engine, no helm binary, no cluster), kubernetes-validate checks every object, and the default
# render is compared with `kubectl kustomize deploy/base` (tests/helm/test_chart.py says what).
# Last line: "test_chart: N passed, M failed".
set -euo pipefail
cd "$(dirname "$0")/.."
BIN=${TESSERA_BIN:-target/release/tessera}
tmp=$(mktemp -d "${TMPDIR:-/tmp}/tessera-helm-test.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
kubectl kustomize deploy/base >"$tmp/base.yaml"
kubectl kustomize deploy/overlays/dra >"$tmp/dra.yaml"
help=()
if [[ -x $BIN ]]; then
  "$BIN" --help >"$tmp/help.txt" 2>&1 || true
  help=(--help-text "$tmp/help.txt")
fi
timeout 180 python3 tests/helm/test_chart.py --root . --base "$tmp/base.yaml" --dra "$tmp/dra.yaml" "${help[@]}"

#!/usr/bin/env bash
# The whole test suite: formatting, lints, unit and end-to-end tests, and the rules, dashboards
# and manifests against a real Prometheus.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-test-deps.sh
# Logs of this run; kept (and named at the end) so a failure can be read afterwards.
LOGS=$(mktemp -d "${TMPDIR:-/tmp}/tessera-test.XXXXXX")
echo "== logs in $LOGS"
df -h . | tail -1
echo "== cargo fmt"; cargo fmt --all -- --check
echo "== cargo clippy"; cargo clippy --workspace --all-targets -- -D warnings
echo "== cargo clippy without the demo (the release image's build)"
cargo clippy -p tessera --no-default-features --all-targets -- -D warnings
echo "== cargo test"; cargo test --workspace 2>&1 | tee "$LOGS/cargo-test.log"
# --- a real Kubernetes API server (issue 36). Here, while target/debug (which its tests use)
# is certainly still there.
echo "== real kube-apiserver + etcd: reflector, DRA objects, RBAC least privilege, cuda-probe admission policy"
scripts/test-kube-real.sh 2>&1 | tee "$LOGS/kube-real.log" | grep -Ev '^ok ' || true
grep -qE '^test_kube_real: [0-9]+ passed, 0 failed$' "$LOGS/kube-real.log"
# ---
# --- a real node (issue 43): kubelet + containerd + runc, pods holding GPUs through the
# device-plugin API, tessera's image from the chart's pod spec; the machine checked unchanged.
echo "== real node: kubelet, containerd, runc; GPU pods joined through pod-resources and cgroups; the image on the node"
scripts/test-kube-node.sh 2>&1 | tee "$LOGS/kube-node.log" | grep -Ev '^ok ' || true
grep -qE '^test_kube_node: [0-9]+ passed, 0 failed$' "$LOGS/kube-node.log"
# ---
# Nothing below uses the debug build. Where the disk is short (a CI machine filled up here once,
# at this very step), it is let go before the release build needs the room.
free_kib=$(df -Pk target | awk 'NR == 2 { print $4 }')
if (( free_kib < 8 * 1024 * 1024 )); then
  echo "== $((free_kib / 1024)) MiB free: removing target/debug before the release build"
  rm -rf target/debug
fi
echo "== release build for the Prometheus tests"; cargo build --release -p tessera
echo "== rules, dashboards and manifests against a real Prometheus"
TESSERA_BIN=target/release/tessera scripts/test-prometheus.sh
echo "== dcgm-exporter's consumers (NVIDIA's dashboard, OpenCost, an autoscaler) against --metrics.dcgm-compat"
TESSERA_BIN=target/release/tessera scripts/test-dcgm-compat.sh
echo "== sharing advisor: a week of history backfilled into Prometheus, advice checked per workload shape"
TESSERA_BIN=target/release/tessera scripts/test-advisor.sh
echo "== fleet: 3 simulated nodes into Prometheus and VictoriaMetrics, the same rules in both engines"
TESSERA_BIN=target/release/tessera scripts/fleet.sh --small 2>&1 | tee "$LOGS/fleet.log" | grep -Ev '^ok ' || true
grep -qE '^[0-9]+ passed, 0 failed$' "$LOGS/fleet.log"
echo "== fleet, replayed: 2 h of history and a week of summaries backfilled into both engines, full windows compared"
cargo build --release -p fleet-history
TESSERA_BIN=target/release/tessera scripts/fleet.sh --small --replay docs/data/fleet-captures-16.tar.xz \
  --history-hours 2 --nodes 3 --seconds 90 --scrape 15 --eval 15 2>&1 | tee "$LOGS/fleet-replay.log" | grep -Ev '^ok ' || true
grep -qE '^[0-9]+ passed, 0 failed$' "$LOGS/fleet-replay.log"
# --- install on a cluster (issue 11): Helm chart, container image, alerts through Alertmanager
echo "== Helm chart: render, lint, validate, agree with deploy/base"
TESSERA_BIN=target/release/tessera scripts/test-helm.sh 2>&1 | tee "$LOGS/helm.log" | grep -Ev '^ok ' || true
grep -qE '^test_chart: [0-9]+ passed, 0 failed$' "$LOGS/helm.log"
echo "== alerts through a real Alertmanager to a webhook receiver"
scripts/test-alertmanager.sh 2>&1 | tee "$LOGS/alertmanager.log" | grep -Ev '^ok ' || true
grep -qE '^test_alertmanager: [0-9]+ passed, 0 failed$' "$LOGS/alertmanager.log"
echo "== container image: build from scratch (buildah), run with podman"
scripts/test-image.sh 2>&1 | tee "$LOGS/image.log"
# ---
echo "== load: 200 concurrent scrapers for 60 s, zero errors (wrk's latency table)"
TESSERA_BIN=target/release/tessera scripts/load.sh 2>&1 | tee "$LOGS/load.log" | sed -n '/Thread Stats/,$p'
grep -q '^1 passed, 0 failed$' "$LOGS/load.log"
echo "== soak: 100,000 sample cycles with process churn, RSS and fds flat"
TESSERA_BIN=target/release/tessera scripts/soak.sh
echo "== all passed (logs in $LOGS)"

#!/usr/bin/env bash
# The whole test suite: formatting, lints, unit and end-to-end tests, and the rules, dashboards
# and manifests against a real Prometheus.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-test-deps.sh
echo "== cargo fmt"; cargo fmt --all -- --check
echo "== cargo clippy"; cargo clippy --workspace --all-targets -- -D warnings
echo "== cargo test"; cargo test --workspace 2>&1 | tee /tmp/tessera-cargo-test.log
echo "== release build for the Prometheus tests"; cargo build --release -p tessera
echo "== rules, dashboards and manifests against a real Prometheus"
TESSERA_BIN=target/release/tessera scripts/test-prometheus.sh
echo "== sharing advisor: a week of history backfilled into Prometheus, advice checked per workload shape"
TESSERA_BIN=target/release/tessera scripts/test-advisor.sh
echo "== load: 200 concurrent scrapers for 60 s, zero errors"
TESSERA_BIN=target/release/tessera scripts/load.sh | tail -4
echo "== soak: 100,000 sample cycles with process churn, RSS and fds flat"
TESSERA_BIN=target/release/tessera scripts/soak.sh

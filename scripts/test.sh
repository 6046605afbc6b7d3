#!/usr/bin/env bash
# The whole test suite: formatting, lints, unit and end-to-end tests, and the rules, dashboards
# and manifests against a real Prometheus. Every stage is timed; the table at the end gives
# each one's start, time and result (scripts/lib/stages.sh; adding a stage is one `stage` line).
set -euo pipefail
cd "$(dirname "$0")/.."
# Logs of this run; kept (and named at the end) so a failure can be read afterwards.
LOGS=$(mktemp -d "${TMPDIR:-/tmp}/tessera-test.XXXXXX")
export TESSERA_TEST_LOGS=$LOGS
# shellcheck source=lib/stages.sh
. scripts/lib/stages.sh
echo "== logs in $LOGS"
df -h . | tail -1

stage fmt cargo fmt --all -- --check

# The lints and the release build side by side: both only compile (nothing timed runs beside
# them), and each fills the other's idle core (a build's long single-crate tails, its links).
# Every release artefact comes from one cargo run and is copied: the stages run the copy, so
# the image stage can build target/release/tessera without the demo while they do.
BIN=$LOGS/bin
release_build() {
  cargo build --release -p tessera -p fake-nvml -p fleet-history
  mkdir -p "$BIN/deps"
  cp target/release/tessera target/release/fleet-history "$BIN/"
  cp target/release/deps/libfake_nvml.so "$BIN/deps/"
}
lints() {
  stage clippy cargo clippy --workspace --all-targets -- -D warnings
  # The release image's build: only the tessera crate is checked again.
  stage clippy-no-demo cargo clippy -p tessera --no-default-features --all-targets -- -D warnings
}
# What the stages need beyond Rust, installed where missing, beside the first builds, which need
# none of it: much of the install waits on downloads (packages, Go modules), and those waits
# give the builds the cores. Nothing after lanes_wait runs without it.
lane deps stage deps scripts/install-test-deps.sh
lane lints lints
lane release stage release-build release_build
lanes_wait
[[ $(stage_result deps) == passed ]] || exit 1
export TESSERA_BIN=$BIN/tessera FLEET_HISTORY_BIN=$BIN/fleet-history
R=(--needs release-build)

# Where the disk is short (a CI machine filled up once, at the release build), the lints'
# artefacts are let go before the test build needs the room.
free_kib=$({ df -Pk target 2>/dev/null || df -Pk .; } | awk 'NR == 2 { print $4 }')
if ((free_kib < 8 * 1024 * 1024)); then
  echo "== $((free_kib / 1024)) MiB free: removing target/debug before the test build"
  rm -rf target/debug
fi
# Alone: end-to-end tests that time their waits get the cores to themselves.
stage cargo-test cargo test --workspace
# A real Kubernetes API server; its cargo build is the one cargo-test made.
stage kube-real --expect '^test_kube_real: [0-9]+ passed, 0 failed$' scripts/test-kube-real.sh
# A real node: kubelet + containerd + runc, pods holding GPUs through the
# device-plugin API, tessera's image from the chart's pod spec; the machine checked unchanged.
# Alone: it starts a node's daemons and builds the image.
stage kube-node --expect '^test_kube_node: [0-9]+ passed, 0 failed$' scripts/test-kube-node.sh

# Two lanes on the 2 cores: one mostly waits on live servers (scrapes, rule rounds,
# notifications), the other mostly computes (backfills, a build). Each stage waits on
# conditions, never on the clock, so it passes at whatever speed the other lane leaves it.
serving() {
  stage "${R[@]}" prometheus scripts/test-prometheus.sh
  stage "${R[@]}" dcgm-compat scripts/test-dcgm-compat.sh
  stage --expect '^test_alertmanager: [0-9]+ passed, 0 failed$' alertmanager scripts/test-alertmanager.sh
  stage "${R[@]}" --expect '^test_chart: [0-9]+ passed, 0 failed$' helm scripts/test-helm.sh
  stage "${R[@]}" --expect '^[0-9]+ passed, 0 failed$' fleet scripts/fleet.sh --small
  stage "${R[@]}" --expect '^[0-9]+ passed, 0 failed$' fleet-replay scripts/fleet.sh --small \
    --replay tests/data/fleet-captures-16.tar.xz --history-hours 2 --nodes 3 --seconds 90 --scrape 15 --eval 15
  # The parsers of what any local process may send, 30 s a target (its table ends the log),
  # built unoptimized: in about 40 % of the optimized build's CPU time, overflow checks on.
  # Here, not in the computing lane: this lane is done waiting on servers by then, and the
  # fuzzers' instrumented build would otherwise queue behind the arm64 builds.
  stage --expect '^\| probe_session \| ' fuzz env FUZZ_SECONDS=30 FUZZ_PROFILE=dev scripts/fuzz.sh
}
computing() {
  stage "${R[@]}" advisor scripts/test-advisor.sh
  # The CUDA probe that ships, linked against glibc 2.17: it loads in old tenant images.
  stage --expect '^test_probe_glibc: [0-9]+ passed, 0 failed$' probe-glibc scripts/test-probe-glibc.sh
  # The probe across PID namespaces with the policy's mounts, one tenant another user (root).
  stage --needs cargo-test --expect '^test_probe_namespaces: [0-9]+ passed, 0 failed$' probe-namespaces \
    scripts/test-probe-namespaces.sh
  # arm64, emulated: unit, golden and DCGM tests built for aarch64 and run under qemu-user.
  stage --expect '^test_arm64: [0-9]+ passed, 0 failed$' arm64 scripts/test-arm64.sh
  stage "${R[@]}" --expect '^[0-9]+ passed, 0 failed$' image scripts/test-image.sh
  # Counts cycles, not seconds: a busy neighbour makes it longer, not different.
  stage "${R[@]}" --expect '^1 passed, 0 failed$' soak scripts/soak.sh
}
lane serving serving
lane computing computing
lanes_wait

# Alone: the load test's latency table is the machine's, not a neighbour's.
stage "${R[@]}" --expect '^1 passed, 0 failed$' load scripts/load.sh

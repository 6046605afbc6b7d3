#!/usr/bin/env bash
# Test tessera's Prometheus side end to end: rules, dashboards and deploy.
#
#   scripts/test-prometheus.sh
#
# (a) promtool check rules + promtool test rules (tests/prometheus/*.test.yaml),
#     static checks of rules/runbooks/dashboards, PrometheusRule not stale;
# (b) a real Prometheus (2.42+) on loopback scraping the exporter every second:
#     ${TESSERA_BIN:-target/release/tessera} --demo (default detail) when that binary exists,
#     else tests/prometheus/fixture-exposition.txt served by serve_fixture.py
#     (TESSERA_TEST_FIXTURE=1 forces the fixture). The rules are loaded with
#     every alert's `for:` set to 0s (tests/prometheus/rules_for_test.py; the
#     expressions are unchanged). Then every rule expression and every
#     dashboard query is evaluated through /api/v1/query
#     (tests/prometheus/check_queries.py): each must parse and return data
#     unless tests/prometheus/expected-empty.yaml lists it with a reason, use
#     only metric names the exporter exposes or recording rules produce, and
#     the demo's idle GPU must fire the idle alerts;
# (c) kubectl kustomize every overlay, kubernetes-validate --strict (pinned in
#     tests/prometheus/requirements.txt) for Kubernetes 1.30 and 1.34 on
#     the built-in kinds, and structural checks of the CRDs and of the
#     agreement between DaemonSet, Service, ServiceMonitor, PrometheusRule,
#     dashboards and the exporter's flags (tests/prometheus/check_deploy.py).
#
# Needs: promtool and prometheus (Debian: apt-get install prometheus), python3
# with PyYAML, kubectl (with kustomize), kubernetes-validate. Listens on
# 127.0.0.1 only; every process it starts is stopped on exit; the whole run
# is bounded by TESSERA_TEST_TIMEOUT seconds (default 300).
# Last line: "N passed, M failed"; exit status 1 if anything failed.
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."
ROOT=$PWD
TESTS=$ROOT/tests/prometheus
TESSERA_BIN=${TESSERA_BIN:-target/release/tessera}
LIMIT=${TESSERA_TEST_TIMEOUT:-300}
K8S_VERSIONS=(1.30.0 1.34.0)

passed=0
failed=0
pids=()
tmp=$(mktemp -d "${TMPDIR:-/tmp}/tessera-prom-test.XXXXXX")

cleanup() {
  local p
  for p in "${pids[@]}"; do
    kill "$p" 2>/dev/null || true
  done
  for p in "${pids[@]}"; do
    wait "$p" 2>/dev/null || true
  done
  rm -rf "$tmp"
}
trap cleanup EXIT
trap 'echo "interrupted"; echo "$passed passed, $((failed + 1)) failed"; exit 130' INT TERM

# shellcheck source=lib/harness.sh
. scripts/lib/harness.sh
start_watchdog test-prometheus.sh "$LIMIT"
pids+=("$watchdog_pid")

# check NAME CMD...: one check, output shown only on failure.
check() {
  local name=$1 log
  shift
  log=$tmp/check.log
  if "$@" >"$log" 2>&1; then
    pass "$name"
  else
    fail "$name"
    sed 's/^/      /' "$log" | tail -n 40
  fi
}

# helper NAME CMD...: a python checker printing ok/FAIL lines and
# "<name>: N passed, M failed"; its counts are added to ours.
helper() {
  local name=$1 log line p f
  shift
  log=$tmp/$name.log
  "$@" >"$log" 2>&1 || true
  # show failures and notes with their indented detail lines
  awk '/^(FAIL|note) /{show=1; print; next} /^      /{if (show) print; next} {show=0}' "$log"
  line=$(grep -E "^$name: [0-9]+ passed, [0-9]+ failed$" "$log" | tail -n 1 || true)
  if [[ -z $line ]]; then
    fail "$name did not finish"
    tail -n 20 "$log" | sed 's/^/      /'
    return
  fi
  p=$(sed -E 's/.*: ([0-9]+) passed.*/\1/' <<<"$line")
  f=$(sed -E 's/.* ([0-9]+) failed/\1/' <<<"$line")
  passed=$((passed + p))
  failed=$((failed + f))
  echo "$line"
}

# ---------------------------------------------------------------------------
section "prerequisites"
missing=()
for tool in promtool prometheus python3 kubectl curl; do
  command -v "$tool" >/dev/null 2>&1 || missing+=("$tool")
done
python3 -c 'import yaml' 2>/dev/null || missing+=("python3-yaml")
command -v kubernetes-validate >/dev/null 2>&1 || missing+=("kubernetes-validate (pip install -r tests/prometheus/requirements.txt)")
if ((${#missing[@]})); then
  fail "missing tools: ${missing[*]}"
  echo "$passed passed, $failed failed"
  exit 1
fi
pass "tools present ($(prometheus --version 2>&1 | head -n 1 | cut -d' ' -f1-3); kubernetes-validate $(kubernetes-validate --version 2>&1))"

# ---------------------------------------------------------------------------
section "(a) rules: promtool, static checks"
rule_files=(alerts/tessera-recording.yaml alerts/tessera-alerts.yaml alerts/tessera-limits.yaml alerts/tessera-advisor.yaml)
check "promtool check rules ${rule_files[*]}" promtool check rules "${rule_files[@]}"
for t in "$TESTS"/*.test.yaml; do
  check "promtool test rules ${t#"$ROOT"/}" promtool test rules "$t"
done
check "PrometheusRule is up to date with alerts/ (deploy/gen-prometheusrule.py --check)" python3 deploy/gen-prometheusrule.py --check
helper check_static python3 "$TESTS/check_static.py" --root "$ROOT"

# ---------------------------------------------------------------------------
section "(b) live Prometheus"
exp_port=$(free_port)
prom_port=$(free_port)
while [[ $prom_port == "$exp_port" ]]; do prom_port=$(free_port); done

if [[ -x $TESSERA_BIN && -z ${TESSERA_TEST_FIXTURE:-} ]]; then
  # The default detail, as a default install runs it: every dashboard panel must show data
  # there (check_static.py keeps full-only families out of the dashboards; this proves it live).
  source_desc="exporter $TESSERA_BIN --demo (default --metrics.detail)"
  "$TESSERA_BIN" --demo --web.listen-address="127.0.0.1:$exp_port" >"$tmp/exporter.log" 2>&1 &
  exp_pid=$!
  pids+=("$exp_pid")
  "$TESSERA_BIN" --help >"$tmp/tessera-help.txt" 2>&1 || true
else
  if [[ -n ${TESSERA_TEST_FIXTURE:-} ]]; then why="TESSERA_TEST_FIXTURE set"; else why="no $TESSERA_BIN"; fi
  source_desc="fixture tests/prometheus/fixture-exposition.txt ($why)"
  python3 "$TESTS/serve_fixture.py" "$TESTS/fixture-exposition.txt" "$exp_port" >"$tmp/exporter.log" 2>&1 &
  exp_pid=$!
  pids+=("$exp_pid")
fi
live=1
if wait_http "http://127.0.0.1:$exp_port/metrics" 30 "$exp_pid"; then
  pass "metrics served on 127.0.0.1:$exp_port by the $source_desc"
else
  fail "nothing serves /metrics on 127.0.0.1:$exp_port ($source_desc)"
  tail -n 20 "$tmp/exporter.log" | sed 's/^/      /'
  live=0
fi
for ep in healthz readyz; do
  check "GET /$ep answers" curl -fsS --max-time 2 "http://127.0.0.1:$exp_port/$ep"
done
# The exposition through Prometheus' own linter (promtool check metrics); the one warning it
# gives OpenMetrics counters is justified in docs/metrics.md, any other fails.
if ((live)) && curl -fsS --max-time 5 "http://127.0.0.1:$exp_port/metrics" >"$tmp/exposition.txt"; then
  helper lint_exposition python3 "$TESTS/lint_exposition.py" "$tmp/exposition.txt"
fi

python3 "$TESTS/rules_for_test.py" "$tmp/rules" "${rule_files[@]}"
cat >"$tmp/prometheus.yml" <<EOF
global:
  scrape_interval: 1s
  scrape_timeout: 1s
  evaluation_interval: 1s
rule_files:
  - $tmp/rules/*.yaml
scrape_configs:
  - job_name: tessera
    static_configs:
      - targets: ["127.0.0.1:$exp_port"]
EOF
prometheus --config.file="$tmp/prometheus.yml" --storage.tsdb.path="$tmp/data" \
  --web.listen-address="127.0.0.1:$prom_port" --log.level=warn >"$tmp/prometheus.log" 2>&1 &
pids+=($!)
prom_pid=$!
if wait_http "http://127.0.0.1:$prom_port/-/ready" 30 "$prom_pid"; then
  pass "Prometheus ready on 127.0.0.1:$prom_port (rules with for: 0s from $tmp/rules)"
else
  fail "Prometheus did not become ready"
  tail -n 20 "$tmp/prometheus.log" | sed 's/^/      /'
  live=0
fi

# Wait until the target is up and has been scraped long enough for rate()
# and the chained recording rules (15 scrapes), bounded at 120 s.
up=""
n=0
for ((i = 0; i < 120 && live; i++)); do
  up=$(prom_value 'up{job="tessera"}')
  n=$(prom_value 'count_over_time(up{job="tessera"}[1m])')
  if [[ $up == 1 && ${n:-0} -ge 15 ]]; then break; fi
  sleep 1
done
if ((live)) && [[ $up == 1 ]]; then
  pass "Prometheus scrapes tessera (up == 1, ${n:-0} scrapes)"
  # Two more rounds of every rule group, counted (not 2 s: on busy cores that was none), so
  # the rules that read recorded series see them computed on those 15 scrapes.
  if python3 "$TESTS/wait_rules.py" --prom "http://127.0.0.1:$prom_port" --rounds 2 --timeout 120 >"$tmp/wait_rules.log" 2>&1; then
    pass "$(cat "$tmp/wait_rules.log")"
  else
    fail "$(cat "$tmp/wait_rules.log")"
  fi
  helper check_queries python3 "$TESTS/check_queries.py" --prom "http://127.0.0.1:$prom_port" --job tessera \
    --expected-empty "$TESTS/expected-empty.yaml" --rules "${rule_files[@]}" --dashboards dashboards/*.json
else
  fail "no live data (target up=${up:-none}): rule and dashboard queries not evaluated"
  if ((live)); then
    curl -fsS --max-time 5 "http://127.0.0.1:$prom_port/api/v1/targets" | head -c 1000 | sed 's/^/      /' || true
  fi
fi

# ---------------------------------------------------------------------------
section "(c) deploy: kustomize, kubernetes-validate, agreement"
render_ok=1
for overlay in base overlays/dra overlays/prometheus-operator overlays/cuda-probe overlays/dcgm-compat; do
  out=$tmp/$(basename "$overlay").yaml
  if kubectl kustomize "deploy/$overlay" >"$out" 2>"$tmp/kustomize.err"; then
    pass "kubectl kustomize deploy/$overlay ($(grep -c '^kind:' "$out") objects)"
  else
    fail "kubectl kustomize deploy/$overlay"
    sed 's/^/      /' "$tmp/kustomize.err"
    render_ok=0
    continue
  fi
  # kubernetes-validate knows the built-in kinds only; the CRDs
  # (ServiceMonitor, PrometheusRule) are checked by check_deploy.py. Its newest schema (1.34)
  # predates MutatingAdmissionPolicy v1 (1.36): a real kube-apiserver validates and evaluates
  # the policy instead (scripts/test-kube-real.sh).
  python3 - "$out" "$out.builtin" <<'EOF'
import sys, yaml
docs = [d for d in yaml.safe_load_all(open(sys.argv[1])) if d]
keep = [d for d in docs if not d["apiVersion"].startswith("monitoring.coreos.com/")
        and not d["kind"].startswith("MutatingAdmissionPolicy")]
yaml.safe_dump_all(keep, open(sys.argv[2], "w"), sort_keys=False)
EOF
  for v in "${K8S_VERSIONS[@]}"; do
    check "kubernetes-validate --strict -k $v deploy/$overlay" kubernetes-validate --strict --quiet -k "$v" "$out.builtin"
  done
done
if ((render_ok)); then
  help_args=()
  [[ -s $tmp/tessera-help.txt ]] && help_args=(--help-text "$tmp/tessera-help.txt")
  helper check_deploy python3 "$TESTS/check_deploy.py" --root "$ROOT" --base "$tmp/base.yaml" \
    --dra "$tmp/dra.yaml" --operator "$tmp/prometheus-operator.yaml" --probe "$tmp/cuda-probe.yaml" \
    "${help_args[@]}"
fi

echo
echo "$passed passed, $failed failed"
((failed == 0))

#!/usr/bin/env bash
# Alerts through a real Alertmanager: a real Prometheus evaluates alerts/*.yaml against a
# synthetic exposition and sends to Debian's prometheus-alertmanager running
# deploy/alertmanager/alertmanager.yml; a webhook receiver checks routing, grouping and
# inhibition (tests/alertmanager/test_alertmanager.py says what). Loopback only, ~15 s.
# Last line: "test_alertmanager: N passed, M failed".
set -euo pipefail
cd "$(dirname "$0")/.."
exec timeout 240 python3 tests/alertmanager/test_alertmanager.py --root .

#!/usr/bin/env python3
"""Run every dashboard query and every rule expression against a live
Prometheus that scrapes tessera (or its fixture) and loads tessera's rules.

For each query: it must parse and evaluate without error, it must return
data unless tests/prometheus/expected-empty.yaml lists it with a reason, and
every metric name in it must be either scraped from the exporter (job
--job) or produced by a shipped recording rule (names listed under
metrics_absent_ok in expected-empty.yaml are tolerated, with their reason).
Then: every rule loaded with health "ok", the alerts under must_fire are
firing, and no firing alert's annotations show a template error.

Prints one line per check ("ok ..." / "FAIL ...") and, last,
"check_queries: N passed, M failed". Exit status 1 when M > 0.

    check_queries.py --prom http://127.0.0.1:PORT --job tessera \
        --expected-empty tests/prometheus/expected-empty.yaml \
        --rules alerts/tessera-alerts.yaml alerts/tessera-recording.yaml \
        --dashboards dashboards/*.json
"""
import argparse
import json
import os
import re
import sys
import urllib.parse
import urllib.request

import yaml

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from checker import Checker  # noqa: E402
from promql_names import dashboard_queries, load_rules, metric_names, substitute  # noqa: E402

PROM_BUILTIN = {"up", "scrape_duration_seconds", "scrape_samples_scraped",
                "scrape_samples_post_metric_relabeling", "scrape_series_added", "ALERTS", "ALERTS_FOR_STATE"}


def get(prom, path, **params):
    url = f"{prom}{path}"
    if params:
        url += "?" + urllib.parse.urlencode(params, doseq=True)
    try:
        with urllib.request.urlopen(url, timeout=20) as r:
            return json.load(r)
    except urllib.error.HTTPError as e:  # 400/422 carry a JSON error body
        return json.load(e)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--prom", required=True)
    ap.add_argument("--job", default="tessera")
    ap.add_argument("--expected-empty", required=True)
    ap.add_argument("--rules", nargs="+", required=True)
    ap.add_argument("--dashboards", nargs="+", required=True)
    a = ap.parse_args()
    c = Checker()

    with open(a.expected_empty, encoding="utf-8") as f:
        exp = yaml.safe_load(f) or {}
    exp_rules = exp.get("rules") or {}
    exp_queries = exp.get("dashboard_queries") or {}
    absent_ok = exp.get("metrics_absent_ok") or {}

    rules = load_rules(a.rules)
    recorded = {name for kind, name, _, _ in rules if kind == "record"}
    scraped = set(get(a.prom, "/api/v1/label/__name__/values", **{"match[]": f'{{job="{a.job}"}}'})["data"])
    allowed = scraped | recorded | PROM_BUILTIN
    # The scrape must not be confused with recording-rule output: only names
    # that are not recording rules count as "exported".
    exported = scraped - recorded
    if exported:
        c.ok(f"exporter exposes {len(exported)} metric names through job {a.job}")
    else:
        c.fail(f"no metric scraped from job {a.job}")

    queries = [(f"rule {name}", name, expr, exp_rules) for _, name, expr, _ in rules]
    for path in a.dashboards:
        for key, expr in dashboard_queries(path):
            queries.append((f"panel {key}", key, expr, exp_queries))

    def expected_empty(key, table):
        if key in table:
            return table[key]
        base = key.split("#")[0]
        return table.get(base)

    seen_keys = set()
    for label, key, raw, table in queries:
        seen_keys.add(key)
        seen_keys.add(key.split("#")[0])
        expr = substitute(raw)
        unknown = sorted(n for n in metric_names(expr) if n not in allowed and n not in absent_ok)
        if unknown:
            c.fail(f"{label}: unknown metric name(s) {unknown} (not scraped from the exporter, not a recording rule)")
            continue
        r = get(a.prom, "/api/v1/query", query=expr)
        if r.get("status") != "success":
            c.fail(f"{label}: {r.get('errorType')}: {r.get('error')}\n      {expr}")
            continue
        result = r["data"]["result"]
        n = len(result) if isinstance(result, list) else 1
        reason = expected_empty(key, table)
        if n:
            c.ok(f"{label}: {n} series")
            if reason:
                c.note(f"{label} is listed in expected-empty.yaml but returned data")
        elif reason:
            c.ok(f"{label}: empty, as expected ({reason})")
        else:
            c.fail(f"{label}: returned no data and is not listed in expected-empty.yaml\n      {expr}")

    # Stale entries in expected-empty.yaml hide nothing but mislead: fail them.
    for key in list(exp_rules) + list(exp_queries):
        if key not in seen_keys:
            c.fail(f"expected-empty.yaml lists {key!r}, which is no rule or dashboard query")
    for name in absent_ok:
        if name in scraped:
            c.note(f"metrics_absent_ok lists {name}, which the exporter does expose now")

    # Every rule evaluates cleanly inside Prometheus (catches many-to-many
    # matching and other runtime errors the instant queries above might miss).
    groups = get(a.prom, "/api/v1/rules")["data"]["groups"]
    loaded = {r["name"]: r for g in groups for r in g["rules"]}
    for kind, name, _, _ in rules:
        r = loaded.get(name)
        if r is None:
            c.fail(f"rule {name} is not loaded by Prometheus")
        elif r.get("health") != "ok":
            c.fail(f"rule {name} health {r.get('health')}: {r.get('lastError')}")
        else:
            c.ok(f"rule {name} loaded and evaluating")

    alerts = get(a.prom, "/api/v1/alerts")["data"]["alerts"]
    firing = [x for x in alerts if x["state"] == "firing"]
    for want in exp.get("must_fire") or []:
        names = re.compile(f"^(?:{want['alert']})$")
        labels = want.get("labels") or {}
        hits = [x for x in firing if names.match(x["labels"]["alertname"])
                and all(x["labels"].get(k) == v for k, v in labels.items())]
        desc = f"{want['alert']} {labels}"
        if hits:
            c.ok(f"alert firing: {desc} ({', '.join(sorted({h['labels']['alertname'] for h in hits}))}) -- {want.get('why', '')}")
        else:
            c.fail(f"alert not firing: {desc}; firing now: {sorted({x['labels']['alertname'] for x in firing})}")
    for never in exp.get("must_not_fire") or []:
        names = re.compile(f"^(?:{never['alert']})$")
        labels = never.get("labels") or {}
        hits = [x for x in alerts if names.match(x["labels"]["alertname"])
                and all(x["labels"].get(k) == v for k, v in labels.items())]
        desc = f"{never['alert']} {labels}"
        if hits:
            c.fail(f"alert must not fire: {desc}: {sorted({h['labels'].get('pod', '') for h in hits})} -- {never.get('why', '')}")
        else:
            c.ok(f"alert not firing: {desc} -- {never.get('why', '')}")
    for x in firing:
        text = " ".join(x["annotations"].values())
        if "<no value>" in text or "error executing" in text or "error expanding" in text:
            c.fail(f"alert {x['labels']['alertname']} annotation template problem: {text[:300]}")
    if firing:
        c.ok(f"{len(firing)} firing alert(s) render their annotations")

    print(f"check_queries: {c.passed} passed, {c.failed} failed")
    return 1 if c.failed else 0


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/env python3
"""Measures a running fleet (scripts/fleet.sh starts it): Prometheus and VictoriaMetrics both
hold the same samples (vmagent writes to both), Prometheus and vmalert evaluate the same rules.

    measure.py --prom URL --vm URL --vmalert URL --vmagent URL --rules FILE... \
        --dashboards FILE... --tessera BIN --seconds S --eval E --nodes N [--out JSON] [--check]

Watches for S seconds (rule group durations and Prometheus memory, max over the run), then
measures series, every dashboard query over 1 h and 24 h, `tessera advise` over 7 d, and
compares every recording rule between the engines. Prints a table; --out writes the figures
as JSON. With --check, also counts checks that can fail ("ok ..."/"FAIL ..." lines and, last,
"measure: N passed, M failed").
"""
import argparse
import json
import math
import os
import re
import subprocess
import sys
import time
import urllib.error
import urllib.parse
import urllib.request

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tests", "prometheus"))
from promql_names import dashboard_queries, load_rules, metric_names, substitute  # noqa: E402

# Two engines agree on a value when they differ by less than this, relatively (or absolutely
# near zero): both compute in float64, but sum order and rate boundaries may differ.
REL_TOL = 1e-6
ABS_TOL = 1e-9
# How much more than an average interval's change a counter may move in the intervals at a
# rate window's edges (see the rate check in `compare`).
UNEVEN = 1.25


def get(url, timeout=120, **params):
    if params:
        url += "?" + urllib.parse.urlencode(params, doseq=True)
    try:
        with urllib.request.urlopen(url, timeout=timeout) as r:
            body = r.read()
    except urllib.error.HTTPError as e:
        body = e.read()
    try:
        return json.loads(body)
    except ValueError:
        return {"status": "error", "error": body[:200].decode(errors="replace")}


def text(url):
    with urllib.request.urlopen(url, timeout=30) as r:
        return r.read().decode()


def scalar(prom, query, t=None):
    params = {"query": query}
    if t is not None:
        params["time"] = t
    r = get(prom + "/api/v1/query", **params)
    res = r.get("data", {}).get("result") or []
    return float(res[0]["value"][1]) if res else None


def metric_lines(body, name):
    """(labels text, value) of every sample of `name` in an exposition."""
    out = []
    for line in body.splitlines():
        if line.startswith(name + "{") or line.startswith(name + " "):
            head, _, value = line.rpartition(" ")
            out.append((head[len(name):], float(value)))
    return out


class Checks:
    def __init__(self, on):
        self.on, self.passed, self.failed = on, 0, 0

    def __call__(self, ok, msg):
        if not self.on:
            return
        if ok:
            self.passed += 1
            print(f"ok    {msg}")
        else:
            self.failed += 1
            print(f"FAIL  {msg}")


def watch(a, figures):
    """Polls for a.seconds: max of every rule group's last duration, Prometheus RSS, CPU."""
    groups, vm_groups, rules, history = {}, {}, {}, {}
    rss_max = 0.0
    end = time.time() + a.seconds
    cpu0 = None
    while True:
        body = text(a.prom + "/metrics")
        for labels, v in metric_lines(body, "prometheus_rule_group_last_duration_seconds"):
            g = re.search(r'rule_group="[^"]*;([^"]*)"', labels).group(1)
            groups[g] = max(groups.get(g, 0.0), v)
            history.setdefault(g, []).append(v)
        for g in get(a.prom + "/api/v1/rules").get("data", {}).get("groups", []):
            for r in g["rules"]:
                rules[r["name"]] = max(rules.get(r["name"], 0.0), r.get("evaluationTime") or 0.0)
        rss = metric_lines(body, "process_resident_memory_bytes")
        rss_max = max(rss_max, rss[0][1] if rss else 0.0)
        cpu = metric_lines(body, "process_cpu_seconds_total")
        if cpu0 is None and cpu:
            cpu0 = (time.time(), cpu[0][1])
        try:
            vbody = text(a.vmalert + "/metrics")
            for labels, v in metric_lines(vbody, "vmalert_iteration_duration_seconds"):
                m = re.search(r'group="([^"]*)".*quantile="1"', labels)
                if m and not math.isnan(v):
                    vm_groups[m.group(1)] = max(vm_groups.get(m.group(1), 0.0), v)
        except OSError:
            pass
        if time.time() >= end:
            break
        time.sleep(min(a.eval, max(0.0, end - time.time())))
    if cpu0 and cpu:
        figures["prometheus_cpu_cores"] = round((cpu[0][1] - cpu0[1]) / max(1.0, time.time() - cpu0[0]), 3)
    figures["rule_group_seconds_max"] = dict(sorted(groups.items()))
    # The median shows the steady cost, the max what the neighbours' load added to it.
    figures["rule_group_seconds_median"] = {g: sorted(v)[len(v) // 2] for g, v in sorted(history.items())}
    figures["rule_seconds_max_top10"] = sorted(((round(v, 4), k) for k, v in rules.items()), reverse=True)[:10]
    figures["vmalert_group_seconds_max"] = dict(sorted(vm_groups.items()))
    figures["prometheus_rss_bytes_max"] = rss_max
    figures["prometheus_head_series"] = metric_lines(body, "prometheus_tsdb_head_series")[0][1]
    figures["load_average_1m"] = float(open("/proc/loadavg").read().split()[0])


def series(a, figures):
    p = a.prom
    total = scalar(p, 'sum(scrape_samples_scraped{job="tessera"})')
    figures["scrape_duration_seconds_max"] = scalar(p, 'max(scrape_duration_seconds{job="tessera"})')
    figures["targets_up"] = scalar(p, 'sum(up{job="tessera"})')
    gpus = scalar(p, "count(gpu_info)")
    containers = scalar(p, "count(count by (cluster, node, namespace, pod, container) (gpu_container_allocation))")
    figures.update({
        "nodes": a.nodes,
        "gpus": gpus,
        "containers": containers,
        "series_total": total,
        "series_per_gpu": round(total / gpus, 1) if total and gpus else None,
        "series_per_container": round(total / containers, 1) if total and containers else None,
        "scrape_interval_seconds": a.scrape,
        "samples_per_second": round(total / a.scrape, 1) if total else None,
        "sharing_modes": {r["metric"].get("sharing_mode", ""): float(r["value"][1]) for r in
                          get(p + "/api/v1/query", query="count by (sharing_mode) (gpu_info)")["data"]["result"]},
    })


def variable_defaults(a, path, end):
    """What Grafana shows when the dashboard opens: a variable that offers "All" is All
    (`.*`); one that does not (node-gpu-detail's node) is its first value, sorted."""
    with open(path, encoding="utf-8") as f:
        d = json.load(f)
    values = {}
    for v in d.get("templating", {}).get("list", []):
        if v.get("type") != "query" or v.get("includeAll", True):
            continue
        q = v.get("query")
        q = q.get("query") if isinstance(q, dict) else q
        m = re.match(r"^\s*label_values\((.*),\s*(\w+)\s*\)\s*$", q or "", re.S)
        if not m:
            continue
        sel, label = substitute(m.group(1), values), m.group(2)
        r = get(a.prom + "/api/v1/query", query=f"group by ({label}) ({sel})", time=end)
        found = sorted(x["metric"].get(label, "") for x in r.get("data", {}).get("result", []))
        if found:
            values[v["name"]] = found[0]
    return values


def dashboards(a, figures, check):
    out = {}
    end = time.time()
    chosen = {path: variable_defaults(a, path, end) for path in a.dashboards}
    figures["dashboard_variables"] = {os.path.basename(p): v for p, v in chosen.items() if v}
    for rng, seconds, rate, step in (("1h", 3600, "1m", 15), ("24h", 86400, "5m", 300)):
        times = []
        for path in a.dashboards:
            with open(path, encoding="utf-8") as f:
                instant, least = {}, {}
                for p in json.load(f).get("panels", []):
                    for sub in [p] + p.get("panels", []):
                        for t in sub.get("targets", []):
                            if t.get("expr"):
                                instant[t["expr"]] = bool(t.get("instant"))
                                # A panel's min interval: Grafana steps no finer than it.
                                least[t["expr"]] = duration_seconds(sub.get("interval") or "0s")
            for key, raw in dashboard_queries(path):
                expr = raw
                at = max(step, least.get(raw, 0))
                for k, v in (("${__range_s}", str(seconds)), ("$__range_s", str(seconds)),
                             ("$__range_ms", str(seconds * 1000)), ("${__range}", rng), ("$__range", rng),
                             ("${__rate_interval}", rate), ("$__rate_interval", rate),
                             ("${__interval}", f"{at}s"), ("$__interval", f"{at}s")):
                    expr = expr.replace(k, v)
                expr = substitute(expr, chosen[path])
                t0 = time.perf_counter()
                if instant.get(raw, True):
                    r = get(a.prom + "/api/v1/query", query=expr, time=end)
                else:
                    r = get(a.prom + "/api/v1/query_range", query=expr, start=end - seconds, end=end, step=at)
                dt = time.perf_counter() - t0
                ok = r.get("status") == "success"
                check(ok, f"dashboard {key} over {rng}: {r.get('error', 'answers')} ({dt:.3f} s)")
                times.append((round(dt, 4), key))
        times.sort(reverse=True)
        out[rng] = {"queries": len(times), "max_seconds": times[0][0] if times else None,
                    "slowest": times[:5], "over_1s": [k for t, k in times if t >= 1.0]}
    figures["dashboard_queries"] = out
    figures["dashboard_data_seconds"] = a.history_seconds + a.seconds


def advise(a, figures, check):
    t0 = time.perf_counter()
    r = subprocess.run([a.tessera, "advise", "--prometheus", a.prom, "--window", "7d", "--format", "json",
                        "--price-per-gpu-hour", "2.5"], capture_output=True, text=True, timeout=600)
    dt = time.perf_counter() - t0
    why = "" if r.returncode == 0 else r.stderr.strip()[-300:]
    check(r.returncode == 0, f"tessera advise over 7d exits 0 ({dt:.2f} s) {why}")
    try:
        n = len(json.loads(r.stdout).get("advice", []))
    except ValueError:
        n = None
    figures["advise_seconds"] = round(dt, 2)
    figures["advise_workloads"] = n


def by_labels(result):
    return {tuple(sorted((k, v) for k, v in s["metric"].items() if k != "__name__")): float(s["value"][1])
            for s in result}


def close(x, y):
    if math.isnan(x) and math.isnan(y):
        return True
    return abs(x - y) <= max(ABS_TOL, REL_TOL * max(abs(x), abs(y)))


UNIT = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800}


def duration_seconds(d):
    """A Grafana or Prometheus duration ("1m", "90s", "1h30m") in seconds."""
    return sum(int(n) * UNIT[u] for n, u in re.findall(r"(\d+)([smhdw])", d))


def widest_window(expr):
    return max((int(n) * UNIT[u] for n, u in re.findall(r"\[(\d+)([smhdw])(?:[:\]])", expr)), default=0)


COUNTER_FUNCS = re.compile(r"\b(rate|increase|irate|delta|idelta|deriv)\s*\(")


def rate_window(expr):
    """The narrowest window a counter function of the expression reads, in seconds (0: none)."""
    windows = [int(n) * UNIT[u] for n, u in
               re.findall(r"\b(?:rate|increase|irate|delta|idelta|deriv)\s*\([^\[]*\[(\d+)([smhdw])", expr)]
    return min(windows, default=0)


def kind_of(expr, inputs_equal, data_seconds):
    """Which comparison a rule's expression allows. `exact`: it reads raw samples, or recorded
    series both engines hold with equal values, and the data spans its widest window: both
    engines see the same samples and must agree. `rate`: the same, but through rate() or
    increase(), which the engines define differently (PromQL: the change between the first and
    last sample in the window, extrapolated towards its edges; MetricsQL: the change from the
    last sample before the window, not extrapolated): they differ by about what one scrape
    interval of the counter adds, relative to the window. `window`: the window is longer than
    the data. `chained`: it reads recorded series whose values differ between the engines
    because each engine wrote them at its own evaluation instants."""
    if widest_window(expr) > data_seconds:
        return "window"
    if not inputs_equal:
        return "chained"
    return "rate" if COUNTER_FUNCS.search(expr) else "exact"


def compare(a, figures, check):
    """Every recording rule: loaded and healthy in both engines; its expression evaluated by
    both at the same instant on the same samples; and the series each engine recorded."""
    prom_rules = {r["name"]: r for g in get(a.prom + "/api/v1/rules")["data"]["groups"] for r in g["rules"]}
    vm_groups = get(a.vmalert + "/api/v1/rules").get("data", {}).get("groups", [])
    vm_rules = {r["name"]: r for g in vm_groups for r in g.get("rules", [])}
    rules = load_rules(a.rules)
    for kind, name, _, _ in rules:
        pr, vr = prom_rules.get(name), vm_rules.get(name)
        check(pr is not None and pr.get("health") == "ok", f"Prometheus evaluates {kind} {name}: {pr and pr.get('lastError')}")
        check(vr is not None and vr.get("health") == "ok" and vr.get("lastEvaluation", "").startswith("2"),
              f"vmalert evaluates {kind} {name}: {vr and (vr.get('lastError') or '')[-300:]}")
    # An instant both engines have every sample of: two evaluation rounds ago, on the second.
    t = math.floor(time.time()) - 2 * a.eval
    # Prometheus forwards its samples through vmagent: wait until VictoriaMetrics has them up to t.
    waited = time.time()
    while (scalar(a.vm, "max(timestamp(gpu_up))") or 0) < t and time.time() - waited < 120:
        time.sleep(2)
    figures["victoriametrics_lag_seconds"] = round(time.time() - waited, 1)
    check((scalar(a.vm, "max(timestamp(gpu_up))") or 0) >= t, "VictoriaMetrics holds Prometheus's samples up to the compared instant")
    rows = []
    only = {}  # rule -> engine -> label sets of the expression's result that engine alone has
    recorded = {name for kind, name, _, _ in rules if kind == "record"}
    for kind, name, expr, _ in rules:
        if kind != "record":
            continue
        row = {"rule": name, "expression": expr}
        for what, q in (("expr", expr), ("recorded", name)):
            pr = get(a.prom + "/api/v1/query", query=q, time=t)
            vr = get(a.vm + "/api/v1/query", query=q, time=t)
            if pr.get("status") != "success" or vr.get("status") != "success":
                row[what] = {"error": f"{pr.get('error')} / {vr.get('error')}"}
                continue
            ps, vs = by_labels(pr["data"]["result"]), by_labels(vr["data"]["result"])
            common = ps.keys() & vs.keys()
            if what == "expr":
                only[name] = {"prometheus": ps.keys() - vs.keys(), "victoriametrics": vs.keys() - ps.keys()}
            diffs = [abs(ps[k] - vs[k]) / max(abs(ps[k]), abs(vs[k]), ABS_TOL) for k in common
                     if not close(ps[k], vs[k])]
            # The same differences against the rule's typical value (the median over its
            # series): a series whose counter only began to move near the window's edge has a
            # small rate whose relative difference says nothing about the engines.
            sizes = sorted(max(abs(ps[k]), abs(vs[k])) for k in common)
            typical = sizes[len(sizes) // 2] if sizes else 0.0
            typical_diffs = [abs(ps[k] - vs[k]) / max(abs(ps[k]), abs(vs[k]), typical, ABS_TOL)
                             for k in common if not close(ps[k], vs[k])]
            row[what] = {"prometheus": len(ps), "victoriametrics": len(vs), "common": len(common),
                         "unequal": len(diffs), "max_rel_diff": max(diffs) if diffs else 0.0,
                         "max_diff_of_typical": max(typical_diffs) if typical_diffs else 0.0}
        rows.append(row)
    same = {r["rule"] for r in rows if r["recorded"].get("unequal") == 0
            and r["recorded"].get("prometheus") == r["recorded"].get("victoriametrics") == r["recorded"].get("common")}
    for row in rows:
        name, expr, e = row["rule"], row.pop("expression"), row["expr"]
        row["kind"] = kind_of(expr, (metric_names(expr) & recorded) <= same, a.data_seconds)
        if row["kind"] in ("window", "chained") and "error" not in e:
            # Its recorded inputs were written by each engine at its own instants: a series
            # present at some instants only (a container's compute figure exists only while it
            # alone runs kernels) can be in one engine's inputs and never in the other's, and
            # so in one engine's result only. Such a series is the inputs' difference, not the
            # engines': it passes when the other engine holds none of its inputs.
            unexplained = {eng: [k for k in keys if inputs_seen(a, eng, expr, recorded, k, t)]
                           for eng, keys in only.get(name, {}).items()}
            row["expr"]["only_in_one_engine_unexplained"] = sum(len(v) for v in unexplained.values())
            check(not any(unexplained.values()),
                  f"{name}: both engines return the same {e['common']} series, the rest from inputs one engine "
                  f"never recorded {e}" + (f"; unexplained {unexplained}" if any(unexplained.values()) else ""))
        else:
            check("error" not in e and e["prometheus"] == e["victoriametrics"] == e["common"],
                  f"{name}: both engines return the same {e.get('common')} series {e}")
        if row["kind"] == "exact":
            check(e.get("unequal") == 0, f"{name}: same samples, same values in both engines {e}")
        elif row["kind"] == "rate":
            # PromQL extrapolates up to 1.1 average intervals towards each edge; MetricsQL
            # counts from the last sample before the window: the definitions part by up to
            # (2 × 1.1 + 1) intervals' change, measured against the rule's typical value. That
            # is an interval's *average* change; a counter that moves unevenly (a tenant idle
            # for part of the window, its wasted-hours counter still) changes more in some
            # intervals: UNEVEN allows the edge intervals a quarter more than the average
            # (a clean-clone CI run measured 0.01336 against 3.2 intervals' 0.0133).
            row["rate_tolerance"] = round(3.2 * UNEVEN * a.scrape / max(1, rate_window(expr)), 4)
            check("error" not in e and e.get("max_diff_of_typical", 1) <= row["rate_tolerance"],
                  f"{name}: same samples, rate within {row['rate_tolerance']} in both engines {e}")
    figures["vmalert_vs_prometheus"] = {"at": t, "rel_tol": REL_TOL, "rules": rows}


def inputs_seen(a, engine, expr, recorded, labels, t):
    """Whether the engine other than ENGINE holds, over the expression's widest window before
    t, a recorded input series of EXPR that carries LABELS (those of them ENGINE's own input
    series have). An input that shares no label with the result (a constant such as the kWh
    price, `vector(0.15)`) tells nothing about which series are missing and is passed over; a
    clean-clone CI run failed the energy chain's carbon and cost rules when it answered for
    them. True also when nothing can be told (no recorded input, or none that shares a label
    with the result): unexplained."""
    own, other = (a.prom, a.vm) if engine == "prometheus" else (a.vm, a.prom)
    window = max(widest_window(expr), 300)
    names = sorted(metric_names(expr) & recorded)
    if not names:
        return True
    judged = False
    for n in names:
        held = get(own + "/api/v1/query", query=f"last_over_time({n}[{window}s])", time=t)["data"]["result"]
        keys = {k for s in held for k in s["metric"]} - {"__name__"}
        mine = [(k, v) for k, v in labels if k in keys]
        if not mine:
            continue
        judged = True
        esc = [(k, v.replace("\\", "\\\\").replace('"', '\\"')) for k, v in mine]
        matchers = ",".join([f'__name__="{n}"'] + [f'{k}="{v}"' for k, v in esc])
        if get(other + "/api/v1/query", query=f"count(count_over_time({{{matchers}}}[{window}s]))",
               time=t)["data"]["result"]:
            return True
    return not judged


def table(f):
    def line(k, v):
        print(f"  {k:<46} {v}")
    print("\n== fleet figures")
    for k in ("nodes", "targets_up", "gpus", "containers", "series_total", "series_per_gpu", "series_per_container",
              "samples_per_second", "prometheus_head_series", "prometheus_rss_bytes_max", "prometheus_cpu_cores",
              "load_average_1m", "scrape_duration_seconds_max", "victoriametrics_lag_seconds", "advise_seconds", "advise_workloads", "dashboard_data_seconds"):
        line(k, f.get(k))
    line("sharing_modes (GPUs)", f.get("sharing_modes"))
    print("  rule group                                     Prometheus median / max s   vmalert max s")
    for g, v in f.get("rule_group_seconds_max", {}).items():
        med = f.get("rule_group_seconds_median", {}).get(g, float("nan"))
        print(f"  {g:<46} {med:.4f} / {v:<17.4f} {f.get('vmalert_group_seconds_max', {}).get(g, float('nan')):.4f}")
    line("slowest rules (Prometheus, max s)", f.get("rule_seconds_max_top10", [])[:5])
    for rng, d in f.get("dashboard_queries", {}).items():
        line(f"dashboard queries over {rng}", f"{d['queries']} queries, slowest {d['slowest'][:3]}")
    cmp = f.get("vmalert_vs_prometheus", {}).get("rules", [])
    print("  recording rules, vmalert/VictoriaMetrics vs Prometheus at one instant (kind: rules, unequal, worst rel. diff)")
    for kind in ("exact", "rate", "window", "chained"):
        rows = [r for r in cmp if r["kind"] == kind]
        bad = [r for r in rows if r["expr"].get("unequal") or "error" in r["expr"]]
        worst = max((r["expr"].get("max_rel_diff", 0.0) for r in rows), default=0.0)
        line(f"  {kind}", f"{len(rows)} rules, {len(bad)} unequal, worst {worst:.3g}")
    sets = sum(1 for r in cmp if r["expr"].get("prometheus") != r["expr"].get("victoriametrics"))
    line("  rules whose series sets differ", sets)
    worst = max((r["recorded"].get("max_rel_diff", 0.0) for r in cmp), default=0.0)
    line("  recorded series, worst relative difference", f"{worst:.3g} (engines record at their own instants)")


def main():
    ap = argparse.ArgumentParser()
    for k in ("prom", "vm", "vmalert", "vmagent", "tessera"):
        ap.add_argument("--" + k, required=True)
    ap.add_argument("--rules", nargs="+", required=True)
    ap.add_argument("--dashboards", nargs="+", required=True)
    ap.add_argument("--seconds", type=int, default=60)
    ap.add_argument("--eval", type=int, default=5)
    ap.add_argument("--scrape", type=int, default=5)
    ap.add_argument("--nodes", type=int, required=True)
    ap.add_argument("--data-seconds", type=int, help="how far back the data goes at the end [default: --seconds]")
    ap.add_argument("--history-seconds", type=int, default=0, help="how much of the data was backfilled before the live run")
    ap.add_argument("--out")
    ap.add_argument("--check", action="store_true")
    a = ap.parse_args()
    # The instant compared is two rounds before the end; the first scrape came a scrape after the start.
    a.data_seconds = a.data_seconds or a.seconds - 2 * a.eval - a.scrape
    check = Checks(a.check)
    figures = {"measured_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "live_seconds": a.seconds,
               "eval_interval_seconds": a.eval, "history_seconds": a.history_seconds, "commit": os.environ.get("FLEET_COMMIT", "")}
    watch(a, figures)
    series(a, figures)
    check((figures["gpus"] or 0) == 9 * a.nodes, f"{figures['gpus']} GPUs seen of {9 * a.nodes}")
    compare(a, figures, check)
    dashboards(a, figures, check)
    advise(a, figures, check)
    table(figures)
    if a.out:
        with open(a.out, "w", encoding="utf-8") as fh:
            json.dump(figures, fh, indent=1, sort_keys=True)
            fh.write("\n")
    if a.check:
        print(f"measure: {check.passed} passed, {check.failed} failed")
        sys.exit(1 if check.failed else 0)


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""The layered rules against their direct definitions, over a replayed fleet's history
(scripts/fleet.sh --replay runs it after the backfill).

    layered.py --prom URL --promtool BIN --blocks DIR --work DIR --from S --to S \
        --direct tests/prometheus/direct-rules.yaml [--step S] [--check] alerts/*.yaml

Some shipped rules read what a `*.rollup` group records (peaks over minutes, recorded every
5 minutes) instead of hours of raw samples, or a helper series an earlier rule of their own
group recorded at the same instant. `--direct` holds, for each of them, the expression it
stands for: the one that read the raw samples. This

1. records every `*.rollup` group over [--from, --to] at its own interval (`promtool tsdb
   create-blocks-from rules` against --prom, blocks moved into --blocks, where Prometheus
   loads them) and waits until Prometheus reads them;
2. evaluates each layered rule (a same-group helper written out in place, as Prometheus
   evaluates it at the same instant) and its direct expression with the same range query:
   every --step from the first instant whose longest window the history fills (at most an
   hour after --from) to --to;
3. compares them at every step: the same series (label sets), each value within a relative
   1e-9. An alert's firing set is a function of its expression's series at each evaluation,
   so equal series at every step mean equal firing sets.

Fails (with --check) on any difference, on a rule that reads a rollup and has no direct
expression, and on a direct expression for a rule that is not shipped. Last line: "layered: N passed, M failed".
"""
import argparse
import glob
import json
import math
import os
import re
import shutil
import subprocess
import sys
import time
import urllib.parse
import urllib.request

import yaml

DURATION = re.compile(r"\[(\d+)([smhdw])(?::[^\]]*)?\]")
UNIT = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800}


def get(prom, path, **params):
    qs = urllib.parse.urlencode(params)
    with urllib.request.urlopen(f"{prom}{path}?{qs}", timeout=900) as r:
        return json.load(r)


def widest(expr):
    return max((int(n) * UNIT[u] for n, u in DURATION.findall(expr)), default=0)


def load(files):
    groups = []
    for path in files:
        with open(path, encoding="utf-8") as f:
            groups += yaml.safe_load(f).get("groups", [])
    return groups


def name_re(name):
    return re.compile(r"(?<![A-Za-z0-9_:])" + re.escape(name) + r"(?![A-Za-z0-9_:])")


AGG_OF_SELECTOR = re.compile(r"^\s*(\w+) by \(([^)]*)\) \(\s*([A-Za-z_:][A-Za-z0-9_:]*)\s*\)\s*$")


LEFT_JOIN = re.compile(r"^\s*(\w+)\(\s*([A-Za-z_:][A-Za-z0-9_:]*)(\[[^\]]+\])\s*\)(\s*\*\s*on\s*\([^)]*\)\s*group_left\s*\(\s*\)\s*)(.*)$",
                       re.S)


PRESENCE = re.compile(r'\s*([A-Za-z_][A-Za-z0-9_]*)\s*(!=|=)\s*""\s*')


def label_presence(matchers):
    """[(label, must be set)] where every matcher of `{...}` only asks whether a label is set
    (`L!=""`) or not (`L=""`); None for any other matcher."""
    inner = matchers.strip()[1:-1]
    out = []
    for part in inner.split(","):
        m = PRESENCE.fullmatch(part)
        if not m:
            return None
        out.append((m.group(1), m.group(2) == "!="))
    return out


def written_out(name, body, matchers):
    """A record's definition in place of a selector of it. Matchers on the record go into its
    definition's selector where filtering that selector's series is filtering the record's:
    the definition is one aggregation of one selector and the matchers name only grouping
    labels, or a range function of one selector joined `group_left ()` to one aggregation of
    one selector (the result keeps the left side's labels). Matchers that only ask whether a
    label is set filter any definition's result instead."""
    if not matchers:
        return f"({body.strip()})"
    named = set(re.findall(r"([A-Za-z_][A-Za-z0-9_]*)\s*(?:=~|!~|!=|=)", matchers))
    m = AGG_OF_SELECTOR.match(body)
    if m and named <= {x.strip() for x in m.group(2).split(",")}:
        return f"({m.group(1)} by ({m.group(2)}) ({m.group(3)}{matchers}))"
    j = LEFT_JOIN.match(body)
    if j and AGG_OF_SELECTOR.match(j.group(5)):
        return f"({j.group(1)}({j.group(2)}{matchers}{j.group(3)}){j.group(4)}{j.group(5).strip()})"
    presence = label_presence(matchers)
    if presence is not None:
        # `vector(1)` has no labels, so it matches `on (L)` exactly the series whose L is empty:
        # `and` keeps those, `unless` the others, whatever the definition's shape.
        out = f"({body.strip()})"
        for label, present in presence:
            out = f"({out} {'unless' if present else 'and'} on ({label}) vector(1))"
        return out
    raise SystemExit(f"layered.py: {name}{matchers}: cannot write the matchers into {body.strip()}")


def expand(expr, defs, depth=0):
    """Writes every recorded series the expression reads out in place, by its definition in
    defs, until only raw series and rollups remain. Over a replayed history only the raw series
    and the backfilled rollups exist: a record of another group (gpu_device:gpu_capacity:share)
    holds the live minutes alone. Both sides are expanded alike, so what is compared is what
    changed: a helper in place of the raw series it aggregates."""
    if depth > 20:
        raise SystemExit(f"layered.py: records nested too deep in {expr[:200]}")
    out = expr
    for name, body in defs.items():
        pat = name_re(name)
        if not pat.search(out):
            continue
        if re.search(pat.pattern + r"\s*(\{[^}]*\})?\s*\[", out):
            raise SystemExit(f"layered.py: {name} is read over a range; it cannot be written out in place")
        out = re.sub(pat.pattern + r"(\{[^}]*\})?", lambda m, n=name, b=body: written_out(n, b, m.group(1)), out)
    return out if out == expr else expand(out, defs, depth + 1)


def layered_rules(groups, direct):
    """(name, group, shipped expression with every record it reads written out, the direct
    expression written out alike, reads a rollup) for every rule outside the rollups that reads
    a rollup record or has a direct expression."""
    rollup = {r["record"] for g in groups if g["name"].endswith(".rollup") for r in g["rules"] if "record" in r}
    shipped = {r["record"]: r["expr"] for g in groups if not g["name"].endswith(".rollup")
               for r in g["rules"] if "record" in r}
    as_direct = {n: direct.get(n, e) for n, e in shipped.items()}
    out = []
    for g in groups:
        if g["name"].endswith(".rollup"):
            continue
        for r in g["rules"]:
            expr = r["expr"]
            name = r.get("alert") or r.get("record")
            reads_rollup = any(name_re(n).search(expr) for n in rollup)
            if reads_rollup or name in direct:
                out.append((name, g["name"], expand(expr, shipped),
                            expand(direct[name], as_direct) if name in direct else None, reads_rollup))
    return out


def backfill_rollups(a, groups):
    rollups = [g for g in groups if g["name"].endswith(".rollup")]
    if not rollups:
        return []
    os.makedirs(a.work, exist_ok=True)
    path = os.path.join(a.work, "rollups.yaml")
    with open(path, "w", encoding="utf-8") as f:
        yaml.safe_dump({"groups": rollups}, f, sort_keys=False)
    staging = os.path.join(a.work, "rollup-blocks")
    shutil.rmtree(staging, ignore_errors=True)
    if not a.recorded:
        subprocess.run([a.promtool, "tsdb", "create-blocks-from", "rules", "--url", a.prom,
                        "--start", str(a.start), "--end", str(a.end), "--output-dir", staging, path],
                       check=True, stdout=subprocess.DEVNULL)
    for b in glob.glob(os.path.join(staging, "01*")):
        shutil.move(b, a.blocks)
    names = [r["record"] for g in rollups for r in g["rules"] if "record" in r]
    t0 = time.time()
    while True:
        seen = [n for n in names
                if get(a.prom, "/api/v1/query", query=f"count(count_over_time({n}[1h]))", time=a.start + 3600)
                ["data"]["result"]]
        if len(seen) == len(names) or time.time() - t0 > a.wait:
            return [n for n in names if n not in seen]
        time.sleep(3)


def matrix(a, expr, start):
    body = get(a.prom, "/api/v1/query_range", query=expr, start=start, end=a.end, step=a.step)
    out = {}
    for s in body["data"]["result"]:
        key = tuple(sorted((k, v) for k, v in s["metric"].items() if k != "__name__"))
        for t, v in s["values"]:
            out.setdefault(float(t), {})[key] = float(v)
    return out


def close(x, y):
    if math.isnan(x) or math.isnan(y):
        return math.isnan(x) and math.isnan(y)
    return x == y or abs(x - y) <= 1e-9 * max(abs(x), abs(y))


def compare(a, name, layered, direct):
    # Windows the history does not fill yet are compared too: both sides read what there is.
    start = min(a.start + max(600, min(widest(direct), 3600)), a.end - 600)
    got, want = matrix(a, layered, start), matrix(a, direct, start)
    steps = sorted(set(got) | set(want))
    bad = []
    series_steps = 0
    for t in steps:
        g, w = got.get(t, {}), want.get(t, {})
        series_steps += len(w)
        if set(g) != set(w):
            only = sorted(set(g) ^ set(w))
            bad.append((t, f"series differ: {len(set(g) - set(w))} only layered, "
                           f"{len(set(w) - set(g))} only direct", only[0]))
            continue
        off = [k for k in w if not close(g[k], w[k])]
        if off:
            bad.append((t, f"{len(off)} values differ, e.g. {g[off[0]]} against {w[off[0]]}", off[0]))
    return {"rule": name, "from": start, "steps": int((a.end - start) // a.step) + 1,
            "steps_with_series": len(steps), "series_steps": series_steps, "differences": len(bad),
            "first": [{"t": t, "what": what, "labels": dict(k)} for t, what, k in bad[:3]]}


def main():
    ap = argparse.ArgumentParser()
    for k in ("prom", "promtool", "blocks", "work", "direct"):
        ap.add_argument("--" + k, required=True)
    ap.add_argument("--from", dest="start", type=int, required=True)
    ap.add_argument("--to", dest="end", type=int, required=True)
    ap.add_argument("--step", type=int, default=15)
    ap.add_argument("--wait", type=int, default=180)
    ap.add_argument("--out")
    ap.add_argument("--check", action="store_true")
    # The rollups are in Prometheus already (scripts/fleet/head.py recorded them with the head).
    ap.add_argument("--recorded", action="store_true")
    ap.add_argument("rules", nargs="+")
    a = ap.parse_args()
    groups = load(a.rules)
    with open(a.direct, encoding="utf-8") as f:
        direct = {d["rule"]: d["expr"] for d in yaml.safe_load(f)["rules"]}
    passed = failed = 0

    def check(ok, msg):
        nonlocal passed, failed
        print(("ok    " if ok else "FAIL  ") + msg, flush=True)
        if ok:
            passed += 1
        else:
            failed += 1

    t0 = time.time()
    missing = backfill_rollups(a, groups)
    check(not missing, f"rollups recorded over the history and read by Prometheus ({time.time() - t0:.0f} s)"
          + (f": missing {missing}" if missing else ""))
    rules = layered_rules(groups, direct)
    shipped = {r[0] for r in rules}
    for extra in sorted(set(direct) - shipped):
        check(False, f"{extra}: a direct expression for a rule that is not shipped")
    results = []
    for name, group, layered, direct_expr, _ in rules:
        if direct_expr is None:
            check(False, f"{name} ({group}) reads a rollup and has no direct expression in {a.direct}")
            continue
        t1 = time.time()
        r = compare(a, name, layered, direct_expr)
        r["seconds"] = round(time.time() - t1, 2)
        results.append(r)
        check(r["differences"] == 0 and r["series_steps"] > 0,
              f"{name}: {r['steps']} steps of {a.step} s, {r['series_steps']} series-steps, "
              f"{r['differences']} steps differ ({r['seconds']} s)"
              + (f": {r['first']}" if r["differences"] else ""))
    if a.out:
        with open(a.out, "w", encoding="utf-8") as f:
            json.dump({"from": a.start, "to": a.end, "step": a.step, "rules": results}, f, indent=1)
    print(f"layered: {passed} passed, {failed} failed")
    return 1 if (failed and a.check) else 0


if __name__ == "__main__":
    sys.exit(main())

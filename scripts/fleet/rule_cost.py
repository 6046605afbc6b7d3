#!/usr/bin/env python3
"""What each rule's expression costs one Prometheus at one instant: the samples it reads
(`totalQueryableSamples`, the same on any host) and its evaluation time (this host's), from the
query API's `stats=all`, median of --repeat runs.

    rule_cost.py --prom URL --time T [--repeat 3] [--out FILE] alerts/*.yaml

Expressions that read recorded series read what the Prometheus holds of them: measure on a
Prometheus that evaluates (or has been backfilled with) the recording rules.
"""
import argparse
import json
import statistics
import sys
import urllib.parse
import urllib.request

import yaml


def query(prom, expr, t):
    qs = urllib.parse.urlencode({"query": expr, "time": t, "stats": "all"})
    with urllib.request.urlopen(f"{prom}/api/v1/query?{qs}", timeout=600) as r:
        body = json.load(r)
    data = body["data"]
    stats = data.get("stats", {})
    return (len(data["result"]), stats.get("timings", {}).get("evalTotalTime", 0.0),
            stats.get("samples", {}).get("totalQueryableSamples", 0))


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--prom", required=True)
    p.add_argument("--time", required=True)
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("--out")
    p.add_argument("files", nargs="+")
    a = p.parse_args()
    rows = []
    for path in a.files:
        with open(path, encoding="utf-8") as f:
            doc = yaml.safe_load(f)
        for g in doc.get("groups", []):
            for r in g.get("rules", []):
                name = r.get("alert") or r.get("record")
                runs = [query(a.prom, r["expr"], a.time) for _ in range(a.repeat)]
                rows.append({"group": g["name"], "rule": name, "series": runs[0][0],
                             "seconds": statistics.median(x[1] for x in runs), "samples": runs[0][2]})
                print(f"{g['name']:28} {name:60} {rows[-1]['series']:7} {rows[-1]['samples']:11} "
                      f"{rows[-1]['seconds']:8.3f}", flush=True)
    groups = {}
    for r in rows:
        s = groups.setdefault(r["group"], [0.0, 0])
        s[0] += r["seconds"]
        s[1] += r["samples"]
    for g, (sec, n) in sorted(groups.items()):
        print(f"group {g:28} {n:11} samples {sec:8.3f} s")
    if a.out:
        with open(a.out, "w", encoding="utf-8") as f:
            json.dump({"rules": rows, "groups": groups}, f, indent=1)


if __name__ == "__main__":
    sys.exit(main())

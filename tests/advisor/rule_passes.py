#!/usr/bin/env python3
"""Split recording rules into backfill passes in dependency order.

`promtool tsdb create-blocks-from rules` evaluates every rule against a
Prometheus that must already hold the rule's inputs: a rule that reads another
recorded series needs that series backfilled (and loaded) first. This writes
OUTDIR/pass-1.yaml, pass-2.yaml, ...: pass N holds the rules whose recorded
inputs all come from earlier passes, keeping each rule's group name and
interval. Only the rules of the groups named with --group (repeatable), the
recorded series the rules of --inputs-of groups read, and what those read,
transitively, are included.

    rule_passes.py OUTDIR --group tessera.advisor.summary \
        --inputs-of tessera.advisor.profile alerts/*.yaml

Prints the number of passes.
"""
import argparse
import os
import sys

import yaml

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "prometheus"))
from promql_names import metric_names  # noqa: E402


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("outdir")
    ap.add_argument("--group", action="append", required=True, dest="groups")
    ap.add_argument("--inputs-of", action="append", default=[], dest="inputs_of",
                    help="also the recorded inputs of this group's rules (not the rules themselves)")
    ap.add_argument("files", nargs="+")
    a = ap.parse_args()
    rules = {}  # name -> (group name, interval, rule)
    wanted = []
    readers = []
    for path in a.files:
        with open(path, encoding="utf-8") as f:
            doc = yaml.safe_load(f)
        for g in doc.get("groups", []):
            for r in g.get("rules", []):
                if "record" not in r:
                    continue
                rules[r["record"]] = (g["name"], g.get("interval"), r)
                if g["name"] in a.groups:
                    wanted.append(r["record"])
                elif g["name"] in a.inputs_of:
                    readers.append(r["expr"])
    deps = {n: sorted(m for m in metric_names(r["expr"]) if m in rules and m != n) for n, (_, _, r) in rules.items()}
    level = {}

    def depth(n, seen=()):
        if n in seen:
            sys.exit(f"recording rules form a cycle through {n}")
        if n not in level:
            level[n] = 1 + max((depth(d, seen + (n,)) for d in deps[n]), default=0)
        return level[n]
    wanted += [m for e in readers for m in metric_names(e) if m in rules]
    for n in wanted:
        depth(n)
    os.makedirs(a.outdir, exist_ok=True)
    passes = max(level.values(), default=0)
    for p in range(1, passes + 1):
        groups = {}
        for n, lv in level.items():
            if lv == p:
                gname, interval, r = rules[n]
                g = groups.setdefault(gname, {"name": gname, "rules": []})
                if interval:
                    g["interval"] = interval
                g["rules"].append(r)
        with open(os.path.join(a.outdir, f"pass-{p}.yaml"), "w", encoding="utf-8") as f:
            yaml.safe_dump({"groups": list(groups.values())}, f, sort_keys=False)
    print(passes)


if __name__ == "__main__":
    main()

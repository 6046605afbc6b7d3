#!/usr/bin/env python3
"""Rules moved between groups against the set they came from.

    regroup_check.py --before DIR --direct tests/prometheus/direct-rules.yaml alerts/*.yaml

A rule that only changed group evaluates the same expression; what can change is what it reads
of other rules. Rules of one group run in order at one instant, so a rule that reads a series
recorded earlier in its own group reads this round's value, and one recorded by another group
reads the last value that group wrote. Moving a rule keeps its meaning when every recorded
series it reads comes from the same kind of place as before: from its own group before and
after (and earlier in it), or from another group before and after. This fails on:

- a rule of --before missing from the new set, or a new rule;
- a rule whose expression, `for:`, labels or annotations changed, unless --direct holds its
  direct expression (scripts/fleet/layered.py compares those over the replayed history);
- a group interval that changed for a rule;
- a rule (moved or not) whose expression is unchanged and that reads a series which was
  recorded earlier in its group before and is not now, or the other way round.

Prints one line a rule that moved or changed; last line: "regroup: N passed, M failed".
"""
import argparse
import glob
import os
import sys

import yaml

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tests", "prometheus"))
from promql_names import metric_names  # noqa: E402


def load(files):
    rules = {}
    for path in files:
        with open(path, encoding="utf-8") as f:
            for g in yaml.safe_load(f).get("groups", []):
                records = set()
                for r in g["rules"]:
                    name = r.get("alert") or r.get("record")
                    rules[name] = {"group": g["name"], "interval": g.get("interval"), "rule": r,
                                   "same_group_reads": metric_names(r["expr"]) & records}
                    if "record" in r:
                        records.add(r["record"])
    return rules


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--before", required=True)
    ap.add_argument("--direct", required=True)
    ap.add_argument("files", nargs="+")
    a = ap.parse_args()
    before = load(sorted(glob.glob(os.path.join(a.before, "*.yaml"))))
    after = load(a.files)
    with open(a.direct, encoding="utf-8") as f:
        direct = {d["rule"] for d in yaml.safe_load(f)["rules"]}
    passed = failed = 0

    def check(ok, msg):
        nonlocal passed, failed
        print(("ok    " if ok else "FAIL  ") + msg)
        passed, failed = passed + ok, failed + (not ok)

    for name in sorted(set(before) - set(after)):
        check(False, f"{name}: in {a.before}, not shipped")
    for name in sorted(set(after) - set(before)):
        check(name in direct or "record" in after[name]["rule"],
              f"{name}: new ({after[name]['group']})")
    for name in sorted(set(before) & set(after)):
        b, n = before[name], after[name]
        changed = [k for k in ("expr", "for", "labels", "annotations") if b["rule"].get(k) != n["rule"].get(k)]
        moved = b["group"] != n["group"]
        if not changed and not moved and b["same_group_reads"] != n["same_group_reads"]:
            # A record it reads moved away from (or into) its group.
            check(False, f"{name} ({n['group']}): reads of its own group's records "
                  f"{sorted(b['same_group_reads'])} -> {sorted(n['same_group_reads'])}")
        if not (changed or moved or b["interval"] != n["interval"]):
            continue
        where = f"{b['group']} -> {n['group']}" if moved else n["group"]
        if changed:
            check(changed == ["expr"] and name in direct,
                  f"{name} ({where}): {', '.join(changed)} changed"
                  + ("; its direct expression is compared by layered.py" if name in direct else ", no direct expression"))
        check(b["interval"] == n["interval"], f"{name} ({where}): interval {b['interval']} -> {n['interval']}")
        if moved and not changed:
            check(b["same_group_reads"] == n["same_group_reads"],
                  f"{name} ({where}): same expression; reads of its own group's records "
                  f"{sorted(b['same_group_reads']) or 'none'} -> {sorted(n['same_group_reads']) or 'none'}")
    print(f"regroup: {passed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())

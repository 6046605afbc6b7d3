#!/usr/bin/env python3
"""Check that every recording rule backfilled by scripts/test-advisor.sh covers the week.

    check_backfill.py --prom URL --start S --end E OUTDIR/pass-*.yaml

`promtool tsdb create-blocks-from rules` can write nothing for a rule and still exit 0 (2.42
stops a rule's loop when the first 2-hour block holds no evaluation time:
prometheus/prometheus#19714), and `tessera advise` then reads "only 0 h of history" with no
word about why. So, at instants spread over [S, E], each rule's expression is evaluated
against Prometheus (which holds the raw history and every earlier pass) and compared with the
recorded series there: wherever the expression has data, the backfilled series must be there
too. A rule whose expression has no data anywhere in the generated history is noted, not
failed (nothing could be recorded).

Prints ok/FAIL/note lines and "check_backfill: N passed, M failed".
"""
import argparse
import json
import os
import re
import sys
import urllib.parse
import urllib.request

import yaml

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "prometheus"))
from checker import Checker  # noqa: E402

# Instants per rule: the first just after the history's start (the block the promtool bug
# skips), the last just before its end, the rest evenly between.
INSTANTS = 8
# promtool's --eval-interval in scripts/test-advisor.sh, for groups that name none.
DEFAULT_INTERVAL = 120


def seconds(duration):
    n, unit = re.fullmatch(r"(\d+)([smh])", duration).groups()
    return int(n) * {"s": 1, "m": 60, "h": 3600}[unit]


def count(prom, expr, at):
    q = urllib.parse.urlencode({"query": f"count({expr})", "time": str(at)})
    with urllib.request.urlopen(f"{prom}/api/v1/query?{q}", timeout=60) as r:
        result = json.load(r)["data"]["result"]
    return int(float(result[0]["value"][1])) if result else 0


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--prom", required=True)
    ap.add_argument("--start", type=int, required=True)
    ap.add_argument("--end", type=int, required=True)
    ap.add_argument("passes", nargs="+")
    a = ap.parse_args()
    c = Checker()
    docs = []
    for path in a.passes:
        with open(path, encoding="utf-8") as f:
            docs.append((path, yaml.safe_load(f)))
    longest = max((seconds(g["interval"]) if "interval" in g else DEFAULT_INTERVAL
                   for _, doc in docs for g in doc.get("groups", [])), default=DEFAULT_INTERVAL)
    last = a.end - 60
    for path, doc in docs:
        # Each pass's group first evaluates at its own offset (a hash of its name and file), at
        # or after its inputs' first sample: a pass-N record can start up to N intervals after
        # the raw history does. Its first instant waits that long, and every [5m] window of the
        # expressions has data there.
        depth = int(re.search(r"pass-(\d+)\.yaml$", path).group(1))
        first = a.start + 300 + depth * longest
        instants = [first + (last - first) * i // (INSTANTS - 1) for i in range(INSTANTS)]
        for group in doc.get("groups", []):
            for rule in group.get("rules", []):
                name = rule.get("record")
                if not name:
                    continue
                # Two evaluation intervals (5 m at most) back: the last recorded sample before t.
                recorded = f"last_over_time({name}[10m])"
                missing = []
                with_data = 0
                for t in instants:
                    want = count(a.prom, rule["expr"], t)
                    if want == 0:
                        continue
                    with_data += 1
                    got = count(a.prom, recorded, t)
                    if got < want:
                        missing.append(f"{t}: {got} of {want} series")
                where = f"{os.path.basename(path)}, group {group['name']}"
                if with_data == 0:
                    c.note(f"{name} ({where}): its expression has no data in the generated history")
                    continue
                if missing:
                    c.fail(f"{name} ({where}): missing at {len(missing)} of the {with_data} instants where its "
                           f"expression has data (at {'; '.join(missing[:2])}): promtool wrote no samples there")
                else:
                    c.ok(f"{name} ({where}): backfilled wherever its expression has data ({with_data} of {INSTANTS} instants)")
    print(f"check_backfill: {c.passed} passed, {c.failed} failed")
    return 1 if c.failed else 0


if __name__ == "__main__":
    sys.exit(main())

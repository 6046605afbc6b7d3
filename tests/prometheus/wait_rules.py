#!/usr/bin/env python3
"""Wait until every rule group of a Prometheus has evaluated N more rounds.

    wait_rules.py --prom URL --rounds N --timeout SECONDS

A round is counted, not timed: a group's round is over when each of its rules has been
evaluated once more (prometheus_rule_evaluations_total{rule_group} grew by the group's rule
count). Seconds are not rounds on a loaded machine: a `sleep 2` meant as two rounds of a 1 s
evaluation interval covered none while the cores were taken. Exits 1, naming the groups that
fell short, when SECONDS pass first; prints one line either way.
"""
import argparse
import json
import re
import sys
import time
import urllib.request

SAMPLE = re.compile(r'^prometheus_rule_evaluations_total\{rule_group="((?:[^"\\]|\\.)*)"\} (\S+)$')


def get(url):
    with urllib.request.urlopen(url, timeout=10) as r:
        return r.read().decode()


def evaluations(prom):
    out = {}
    for line in get(f"{prom}/metrics").splitlines():
        m = SAMPLE.match(line)
        if m:
            out[m.group(1).replace('\\"', '"').replace("\\\\", "\\")] = float(m.group(2))
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--prom", required=True)
    ap.add_argument("--rounds", type=int, required=True)
    ap.add_argument("--timeout", type=float, required=True)
    a = ap.parse_args()
    t0 = time.monotonic()
    deadline = t0 + a.timeout
    groups = {}
    while True:
        try:
            doc = json.loads(get(f"{a.prom}/api/v1/rules"))
            groups = {f"{g['file']};{g['name']}": len(g["rules"]) for g in doc["data"]["groups"] if g["rules"]}
            base = evaluations(a.prom)
            break
        except (OSError, ValueError, KeyError) as e:
            if time.monotonic() > deadline:
                print(f"wait_rules: no rule groups from {a.prom} in {a.timeout:.0f} s ({e})")
                return 1
            time.sleep(0.25)
    if not groups:
        print(f"wait_rules: {a.prom} has no rule groups loaded")
        return 1
    short = groups
    while time.monotonic() <= deadline:
        try:
            now = evaluations(a.prom)
        except OSError:
            now = {}
        short = {g: (now.get(g, 0.0) - base.get(g, 0.0)) / n for g, n in groups.items()
                 if now.get(g, 0.0) - base.get(g, 0.0) < a.rounds * n}
        if not short:
            print(f"wait_rules: {len(groups)} groups evaluated {a.rounds} more rounds in {time.monotonic() - t0:.1f} s")
            return 0
        time.sleep(0.25)
    late = ", ".join(f"{g.split(';')[-1]} ({r:.1f})" for g, r in sorted(short.items()))
    print(f"wait_rules: after {a.timeout:.0f} s, groups short of {a.rounds} rounds: {late}")
    return 1


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/env python3
"""promtool check metrics on an exposition, failing on every warning except those docs/metrics.md
justifies: promtool reads the 0.0.4 text format, where a counter's HELP and TYPE name its `_total`
sample; tessera serves OpenMetrics, where they name the family, so promtool finds "no help text"
for each counter's `_total` sample. That one warning passes for a family typed `counter` with a
HELP line; any other fails.

    lint_exposition.py EXPOSITION_FILE      (prints "lint_exposition: N passed, M failed")
"""
import re
import subprocess
import sys


def justified(warning, counters):
    name, _, message = warning.partition(" ")
    return message == "no help text" and name.endswith("_total") and name[: -len("_total")] in counters


def main(path):
    text = open(path, encoding="utf-8").read()
    helped = set(re.findall(r"^# HELP (\S+) ", text, re.M))
    counters = {n for n in re.findall(r"^# TYPE (\S+) counter$", text, re.M) if n in helped}
    run = subprocess.run(["promtool", "check", "metrics"], input=text, capture_output=True, text=True)
    warnings = [l.strip() for l in (run.stdout + run.stderr).splitlines() if l.strip()]
    bad = [w for w in warnings if not justified(w, counters)]
    ok = len(warnings) - len(bad)
    print(f"ok: {ok} warning(s) of OpenMetrics counters' `_total` samples (justified in docs/metrics.md)")
    for w in bad:
        print(f"FAIL promtool check metrics: {w}")
    if run.returncode not in (0, 3) and not warnings:
        print(f"FAIL promtool check metrics exited {run.returncode}")
        bad.append("exit")
    passed = 1 if not bad else 0
    print(f"lint_exposition: {passed} passed, {len(bad)} failed")
    return 0 if not bad else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))

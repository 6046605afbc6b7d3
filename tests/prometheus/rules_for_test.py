#!/usr/bin/env python3
"""Copy Prometheus rule files with every alert's `for:` set to 0s, so that a
Prometheus that has scraped for a few seconds shows which alerts *would* fire,
and without group `interval:`s (the advisor's 5m groups), so every group runs
at the test's evaluation interval.

    rules_for_test.py OUTDIR alerts/tessera-alerts.yaml alerts/tessera-recording.yaml

Only `for` and group intervals change; expressions, windows ([10m], [1h], [1d]) and labels stay as
shipped (range functions over a window longer than the data simply use the
data there is), so what is evaluated is the shipped expression.
"""
import os
import sys

import yaml


def main():
    out, files = sys.argv[1], sys.argv[2:]
    os.makedirs(out, exist_ok=True)
    for path in files:
        with open(path, encoding="utf-8") as f:
            doc = yaml.safe_load(f)
        for g in doc.get("groups", []):
            g.pop("interval", None)
            for r in g.get("rules", []):
                if "alert" in r:
                    r["for"] = "0s"
        with open(os.path.join(out, os.path.basename(path)), "w", encoding="utf-8") as f:
            yaml.safe_dump(doc, f, sort_keys=False)


if __name__ == "__main__":
    main()

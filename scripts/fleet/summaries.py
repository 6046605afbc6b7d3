#!/usr/bin/env python3
"""A week of the advisor's inputs for a replayed fleet (scripts/fleet.sh --replay).

    summaries.py --prom URL --vm URL --rules ADVISOR_RULES --promtool BIN --blocks DIR \
        --days D --step S --work DIR

`tessera advise` and the `tessera.advisor.profile` rules read the 5-minute summaries that
`tessera.advisor.summary` and `.summary.usage` record (alerts/tessera-advisor.yaml). Recording them over a week of
raw samples would take a week of samples (too many to backfill here), so this waits until
Prometheus has recorded them once over the backfilled raw history, then writes those values
every --step seconds over the --days before that instant, into both engines: OpenMetrics ->
`promtool tsdb create-blocks-from openmetrics` -> blocks moved into Prometheus's data
directory (it loads new blocks within a minute), and JSON lines -> VictoriaMetrics's
/api/v1/import. Their values are the fleet's steady state repeated; their count and shape
are what a week of summaries holds, which is what the advisor's cost depends on. Waits
until Prometheus reads the week (count_over_time over 7 d) and prints what it wrote.
"""
import argparse
import glob
import json
import os
import shutil
import subprocess
import sys
import time
import urllib.parse
import urllib.request

import yaml

HELPERS = {"gpu_container:gpu_allocation:max", "gpu_pod_sharing_mode:gpu_attributed_seconds:rate5m"}


def get(url, **params):
    url += "?" + urllib.parse.urlencode(params)
    with urllib.request.urlopen(url, timeout=60) as r:
        return json.loads(r.read())


def labels_text(metric):
    def esc(v):
        return v.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")
    return ",".join(f'{k}="{esc(v)}"' for k, v in sorted(metric.items()) if k != "__name__")


def main():
    ap = argparse.ArgumentParser()
    for k in ("prom", "vm", "rules", "work"):
        ap.add_argument("--" + k, required=True)
    # Without --blocks only VictoriaMetrics gets the week (a shard of scripts/fleet/shards.sh,
    # whose advisor runs against the global layer).
    ap.add_argument("--promtool", default="promtool")
    ap.add_argument("--blocks")
    ap.add_argument("--days", type=int, default=7)
    ap.add_argument("--step", type=int, default=300)
    ap.add_argument("--wait", type=int, default=180)
    # Where Prometheus's head starts (scripts/fleet.sh --head-minutes): no block may reach past
    # it, or Prometheus truncates its head there when it loads the block.
    ap.add_argument("--before", type=int)
    a = ap.parse_args()
    with open(a.rules, encoding="utf-8") as f:
        doc = yaml.safe_load(f)
    # The helpers of their own groups (every replica's allocations, every pod's attributed
    # rate), read by the summaries after them at the same instant: neither the profile rules
    # nor the advisor read them, and a week of them would be a series per container or pod.
    names = [r["record"] for g in doc["groups"] if g["name"].startswith("tessera.advisor.summary")
             for r in g["rules"] if "record" in r and r["record"] not in HELPERS]
    t0 = time.time()
    series = {}
    while time.time() - t0 < a.wait:
        series = {}
        for n in names:
            for s in get(a.prom + "/api/v1/query", query=n)["data"]["result"]:
                series.setdefault(n, []).append(s)
        if len(series) == len(names):
            break
        time.sleep(2)
    missing = [n for n in names if n not in series]
    if missing:
        sys.exit(f"summaries.py: Prometheus recorded no {missing} in {a.wait} s")
    # The week ends before the first summary Prometheus recorded itself.
    first = min(float(s["value"][0]) for ss in series.values() for s in ss)
    end = int(min(first, a.before or first)) // a.step * a.step
    stamps = list(range(end - a.days * 86400, end, a.step))
    os.makedirs(a.work, exist_ok=True)
    om = os.path.join(a.work, "summaries.om")
    js = os.path.join(a.work, "summaries.jsonl")
    n_series = 0
    stamp_list = json.dumps([t * 1000 for t in stamps])
    with open(om if a.blocks else os.devnull, "w", encoding="utf-8") as fo, open(js, "w", encoding="utf-8") as fj:
        for name, ss in series.items():
            for s in ss:
                n_series += 1
                head = f"{name}{{{labels_text(s['metric'])}}}"
                v = s["value"][1]
                if a.blocks:
                    fo.writelines(f"{head} {v} {t}\n" for t in stamps)
                # The line json.dumps would write, its constant parts made once: a week of
                # 5-minute samples is 2,016 numbers a series, thousands of series a shard.
                metric = json.dumps(dict(s["metric"], __name__=name))
                values = json.dumps([float(v)])[1:-1]
                fj.write(f'{{"metric": {metric}, "values": [{", ".join([values] * len(stamps))}], '
                         f'"timestamps": {stamp_list}}}\n')
        fo.write("# EOF\n")
    if a.blocks:
        staging = os.path.join(a.work, "blocks")
        shutil.rmtree(staging, ignore_errors=True)
        subprocess.run([a.promtool, "tsdb", "create-blocks-from", "openmetrics", "--max-block-duration=24h",
                        om, staging], check=True, stdout=subprocess.DEVNULL)
        for b in glob.glob(os.path.join(staging, "01*")):
            shutil.move(b, a.blocks)
    with open(js, "rb") as f:
        req = urllib.request.Request(a.vm + "/api/v1/import", data=f.read(), method="POST")
        urllib.request.urlopen(req, timeout=300).read()
    urllib.request.urlopen(a.vm + "/internal/force_flush", timeout=60).read()
    probe = f"count_over_time({names[1]}[{a.days}d])"
    want = len(stamps) // 2
    seen = {}
    while time.time() - t0 < a.wait + 120:
        seen = {e: max((float(s["value"][1]) for s in get(u + "/api/v1/query", query=f"max({probe})")["data"]["result"]),
                       default=0.0) for e, u in (("prometheus", a.prom), ("victoriametrics", a.vm))
                if a.blocks or e == "victoriametrics"}
        if min(seen.values()) >= want:
            break
        time.sleep(5)
    print(json.dumps({"summary_series": n_series, "samples_each": len(stamps), "from": stamps[0], "to": end,
                      "step_seconds": a.step, "samples_per_series_seen_over_7d": seen,
                      "seconds": round(time.time() - t0, 1)}))
    if min(seen.values()) < want:
        sys.exit("summaries.py: the engines do not read the backfilled week yet")


if __name__ == "__main__":
    main()

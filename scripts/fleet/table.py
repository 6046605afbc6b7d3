#!/usr/bin/env python3
"""Markdown tables from scripts/fleet.sh's data files (measure.py --out), one column per file:
what docs/scale.md shows.

    table.py lab/data/fleet-250-live.json lab/data/fleet-1000-live.json
"""
import json
import sys


def main():
    runs = []
    for p in sys.argv[1:]:
        with open(p, encoding="utf-8") as f:
            runs.append((p, json.load(f)))
    head = "| | " + " | ".join(f"`{p.split('/')[-1]}`" for p, _ in runs) + " |"
    print(head)
    print("|---" * (len(runs) + 1) + "|")

    def row(name, fn):
        cells = []
        for _, d in runs:
            try:
                v = fn(d)
            except (KeyError, TypeError, IndexError, ZeroDivisionError):
                v = None
            cells.append("—" if v is None else str(v))
        print(f"| {name} | " + " | ".join(cells) + " |")

    row("commit", lambda d: d.get("commit"))
    row("nodes / GPUs / containers", lambda d: f"{d['nodes']} / {d['gpus']:.0f} / {d['containers']:.0f}")
    row("live data (s), scrape / eval interval (s)",
        lambda d: f"{d['live_seconds']}, {d['scrape_interval_seconds']} / {d['eval_interval_seconds']}")
    row("load average (1 min) at the end", lambda d: d["load_average_1m"])
    row("tessera series (sum of scrape_samples_scraped)", lambda d: f"{d['series_total']:.0f}")
    row("series per GPU", lambda d: d["series_per_gpu"])
    row("series per container", lambda d: d["series_per_container"])
    row("samples/s ingested", lambda d: d["samples_per_second"])
    row("Prometheus head series", lambda d: f"{d['prometheus_head_series']:.0f}")
    row("Prometheus RSS, max (MiB)", lambda d: f"{d['prometheus_rss_bytes_max'] / 2**20:.0f}")
    row("Prometheus CPU (cores, mean)", lambda d: d.get("prometheus_cpu_cores"))
    groups = sorted({g for _, d in runs for g in d.get("rule_group_seconds_max", {})})
    for g in groups:
        row(f"rule group `{g}`: median / max s",
            lambda d, g=g: (f"{d['rule_group_seconds_median'][g]:.3f} / " if "rule_group_seconds_median" in d else "— / ")
            + f"{d['rule_group_seconds_max'][g]:.3f}")
    for g in groups:
        row(f"vmalert `{g}`: max s", lambda d, g=g: f"{d['vmalert_group_seconds_max'][g]:.3f}")
    for rng in ("1h", "24h"):
        row(f"dashboard queries over {rng}: count, slowest s",
            lambda d, rng=rng: f"{d['dashboard_queries'][rng]['queries']}, {d['dashboard_queries'][rng]['max_seconds']}"
            f" ({d['dashboard_queries'][rng]['slowest'][0][1]})")
        row(f"dashboard queries over {rng} at 1 s or more",
            lambda d, rng=rng: len(d["dashboard_queries"][rng]["over_1s"]))
    row("`tessera advise --window 7d` (s), workloads", lambda d: f"{d['advise_seconds']}, {d['advise_workloads']}")
    for kind in ("exact", "rate", "window", "chained"):
        row(f"recording rules `{kind}`: compared, unequal, worst rel. diff",
            lambda d, kind=kind: "{}, {}, {:.3g}".format(
                *(lambda rs: (len(rs), sum(1 for r in rs if r["expr"].get("unequal")),
                              max((r["expr"].get("max_rel_diff", 0) for r in rs), default=0)))(
                    [r for r in d["vmalert_vs_prometheus"]["rules"] if r.get("kind") == kind])))
    row("recording rules whose series sets differ",
        lambda d: sum(1 for r in d["vmalert_vs_prometheus"]["rules"]
                      if r["expr"].get("prometheus") != r["expr"].get("victoriametrics")))


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""A sharded fleet's global layer, checked (scripts/fleet/shards.sh runs it).

    global_check.py --global URL --shard URL... --dashboards FILE... --tessera BIN [--out JSON]

Each shard is a Prometheus that scrapes part of the fleet, evaluates tessera's rules and
remote-writes everything (scraped and recorded) to one VictoriaMetrics, the global layer.
This checks: every shard's rule groups evaluate without error; the global layer holds every
shard's clusters; fleet-wide figures read there equal the sum of the shards' own (capacity,
allocated GPUs, GPUs, the advisor's summaries); one GPU-hour and one kWh price, as the cost
panels' scalar() needs; every dashboard query answers there (the
queries of scripts/fleet/measure.py, over 1 h and 24 h); `tessera advise` against it exits 0
and names workloads of every shard. Last line: "global: N passed, M failed".
"""
import argparse
import json
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import measure  # noqa: E402

# Fleet-wide figures, each read at one instant from the latest sample a shard wrote: the same
# samples on both sides once the writes have landed, so the sums must be equal.
FLEET_SUMS = [
    ("capacity in GPU-equivalents", "sum(last_over_time(sharing_mode:gpu_capacity:sum[2m]))"),
    ("allocated GPUs", "sum(last_over_time(namespace:gpu_allocated_seconds:rate5m[2m]))"),
    ("GPUs", "count(last_over_time(gpu_info[2m]))"),
    ("workload memory summaries", "count(last_over_time(namespace_workload_sharing_mode:gpu_memory_used_bytes:max5m[10m]))"),
]


# A rollup (recorded every 5 minutes, alerts/tessera-limits.yaml): the heads' part of it was
# recorded as the heads were written, so it reaches the global layer with them.
ROLLUP = "gpu_container:gpu_memory_used_bytes:max10m"


def value(url, query, t):
    r = measure.get(url + "/api/v1/query", query=query, time=t)
    res = r.get("data", {}).get("result", [])
    return float(res[0]["value"][1]) if res else None


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--global", dest="glob", required=True)
    ap.add_argument("--shard", action="append", required=True)
    ap.add_argument("--dashboards", nargs="+", required=True)
    ap.add_argument("--tessera", required=True)
    ap.add_argument("--seconds", type=int, default=60)
    ap.add_argument("--history-seconds", type=int, default=0)
    ap.add_argument("--history-from", type=int, default=0)
    ap.add_argument("--out")
    a = ap.parse_args()
    check = measure.Checks(True)
    figures = {"shards": len(a.shard)}
    clusters = []
    for url in a.shard:
        groups = measure.get(url + "/api/v1/rules")["data"]["groups"]
        bad = [(g["name"], r.get("name"), r.get("lastError")) for g in groups for r in g["rules"]
               if r.get("health") != "ok"]
        check(not bad, f"shard {url}: {len(groups)} rule groups evaluate without error {bad[:2]}")
        r = measure.get(url + "/api/v1/query", query="count by (cluster) (gpu_info)")["data"]["result"]
        clusters.append(sorted(x["metric"].get("cluster", "") for x in r))
    figures["clusters"] = clusters
    # The instant to compare: one evaluation round back, so every shard's write has landed.
    t = time.time() - 30
    seen = {x["metric"].get("cluster", "") for x in
            measure.get(a.glob + "/api/v1/query", query="count by (cluster) (last_over_time(gpu_info[2m]))",
                        time=t)["data"]["result"]}
    want = {c for cs in clusters for c in cs}
    check(want and want <= seen, f"the global layer holds every shard's clusters: {sorted(seen)} (want {sorted(want)})")
    sums = {}
    for what, q in FLEET_SUMS:
        shard_sum = sum(v for v in (value(u, q, t) for u in a.shard) if v is not None)
        g = value(a.glob, q, t)
        sums[what] = {"query": q, "shards": shard_sum, "global": g}
        ok = g is not None and shard_sum > 0 and abs(g - shard_sum) <= 1e-6 * abs(shard_sum)
        check(ok, f"{what} over the global layer equals the shards' sum: {g} against {shard_sum} ({q})")
    figures["fleet_sums"] = sums
    # The cost panels multiply by scalar(cluster:gpu_hour_price:value): one series, or NaN.
    for price in ("cluster:gpu_hour_price:value", "cluster:gpu_energy_kwh_price:value"):
        n = value(a.glob, f"count(last_over_time({price}[2m]))", t)
        check(n == 1, f"the global layer holds one {price} for the cost panels' scalar(): {n}")
    if a.history_seconds:
        # The shards' history reached the global layer apart from their remote write: the
        # dashboards' hour must read an hour there, raw and rolled up alike. Read inside the
        # history (a minute before its end, over all but its first and last minute), where no
        # live sample or evaluation can count.
        span = a.history_seconds - 120
        at = a.history_from + a.history_seconds - 60
        for what, sel, every in (("raw", "gpu_info", 15), ("rolled-up", ROLLUP, 300)):
            n = value(a.glob, f"min(count_over_time({sel}[{span}s]))", at)
            least = 0.9 * span / every
            check(n is not None and n >= least,
                  f"the global layer holds the shards' history of {what} series: at least {n} samples a series "
                  f"over {span} s (want >= {least:.0f})")
    da = argparse.Namespace(prom=a.glob, dashboards=a.dashboards, history_seconds=a.history_seconds, seconds=a.seconds,
                            tessera=a.tessera)
    measure.dashboards(da, figures, check)
    measure.advise(da, figures, check)
    r = measure.get(a.glob + "/api/v1/query",
                    query="count by (cluster) (last_over_time(namespace_workload_sharing_mode:gpu_memory_used_bytes:max5m[10m]))")
    with_summaries = {x["metric"].get("cluster", "") for x in r.get("data", {}).get("result", [])}
    check(want <= with_summaries, f"the advisor's summaries of every shard reach the global layer: {sorted(with_summaries)}")
    check((figures.get("advise_workloads") or 0) > 0,
          f"tessera advise against the global layer names {figures.get('advise_workloads')} workloads")
    for rng, d in figures.get("dashboard_queries", {}).items():
        slow = ", ".join(f"{k} {t:.3f}" for t, k in d["slowest"][:3])
        print(f"      dashboards over {rng}: {d['queries']} queries, slowest {d['max_seconds']} s ({slow})")
    print(f"      tessera advise --window 7d: {figures.get('advise_seconds')} s, "
          f"{figures.get('advise_workloads')} workloads")
    if a.out:
        with open(a.out, "w", encoding="utf-8") as f:
            json.dump(figures, f, indent=1)
    print(f"global: {check.passed} passed, {check.failed} failed")
    return 1 if check.failed else 0


if __name__ == "__main__":
    sys.exit(main())

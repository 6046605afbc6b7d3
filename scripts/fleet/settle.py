#!/usr/bin/env python3
"""Waits until a Prometheus that just opened backfilled blocks is done with them.

    settle.py --prom URL [--min SECONDS] [--max SECONDS] [--cores C]

Backfilled history arrives as many small blocks (one per chunk and core); on start Prometheus
compacts them, which at 4,000 GPUs took up to four cores for a minute and a half. Rule and query
times measured meanwhile are the compactor's, not the rules'. Settled: no compaction finished
over two --every intervals after one had, or one interval under --cores with none (a small
fleet whose blocks need none). At 4,000 GPUs the steady state itself takes more than a core
(ingest and ten rule groups), so CPU alone cannot tell. Prometheus's compactor looks once a
minute: nothing counts as settled before --min. Prints one line an interval: seconds
waited, the last interval's cores, compactions seen; exits 1 if --max passed first."""
import argparse
import sys
import time

from measure import metric_lines, text


def sample(url):
    body = text(url + "/metrics")
    def value(name):
        lines = metric_lines(body, name)
        return lines[0][1] if lines else 0.0
    return time.time(), value("process_cpu_seconds_total"), value("prometheus_tsdb_compactions_total")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--prom", required=True)
    ap.add_argument("--min", type=float, default=90)
    ap.add_argument("--max", type=float, default=240)
    ap.add_argument("--cores", type=float, default=1.0)
    ap.add_argument("--every", type=float, default=10)
    a = ap.parse_args()
    t0 = time.time()
    first = last = sample(a.prom)
    still = 0
    while True:
        time.sleep(a.every)
        now = sample(a.prom)
        cores = (now[1] - last[1]) / max(1e-3, now[0] - last[0])
        still = still + 1 if now[2] == last[2] else 0
        compacted = now[2] > first[2]
        quiet = (compacted and still >= 2) or (not compacted and still and cores < a.cores)
        waited = now[0] - t0
        print(f"settle: {waited:.0f} s, {cores:.2f} cores over the last {a.every:.0f} s, "
              f"{now[2] - first[2]:.0f} compactions", flush=True)
        if quiet and waited >= a.min:
            return 0
        if waited >= a.max:
            return 1
        last = now


if __name__ == "__main__":
    sys.exit(main())

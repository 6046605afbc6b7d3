#!/usr/bin/env python3
"""CPU per scrape of a running tessera, scraped the way Prometheus does it.

    scrape-cpu.py URL PID SCRAPES [gzip|plain] [LATENCIES_FILE]

Sends SCRAPES sequential GETs (one client, Accept-Encoding as given) and reads tessera's thread
CPU times (schedstat) before and after. The serving threads' CPU is counted; the sampler thread
(the once-a-second encode, whatever the scrapers do: scripts/bench-scrape.sh measures it over an
idle window) and the XID thread are left out. Prints one line:

    scrapes=… seconds=… p50_ms=… p99_ms=… max_ms=… serve_cpu_ms_per_scrape=… bytes=…
"""
import os
import sys
import time
import urllib.request


def cpu(pid):
    total = other = 0.0
    for tid in os.listdir(f"/proc/{pid}/task"):
        try:
            with open(f"/proc/{pid}/task/{tid}/comm") as f:
                name = f.read().strip()
            with open(f"/proc/{pid}/task/{tid}/schedstat") as f:
                s = int(f.read().split()[0]) / 1e9
        except (OSError, ValueError, IndexError):
            continue
        total += s
        if name.startswith(("tessera-sampler", "tessera-xid")):
            other += s
    return total - other


def main(argv):
    if len(argv) not in (4, 5, 6):
        sys.exit(__doc__)
    url, pid, n = argv[1], int(argv[2]), int(argv[3])
    enc = argv[4] if len(argv) >= 5 else "gzip"
    headers = {"Accept-Encoding": "gzip"} if enc == "gzip" else {}
    lat = []
    size = 0
    serve0 = cpu(pid)
    t0 = time.monotonic()
    for _ in range(n):
        s = time.monotonic()
        with urllib.request.urlopen(urllib.request.Request(url, headers=headers), timeout=10) as r:
            size = len(r.read())
        lat.append(time.monotonic() - s)
    elapsed = time.monotonic() - t0
    serve1 = cpu(pid)
    if len(argv) == 6:
        # Every latency, for percentiles pooled over rounds (one round's p99 is its 1 % tail).
        with open(argv[5], "a") as f:
            f.writelines(f"{x * 1000:.4f}\n" for x in lat)
    lat.sort()

    def q(p):
        return lat[min(len(lat) - 1, int(p * len(lat)))] * 1000

    print(
        f"scrapes={n} seconds={elapsed:.1f} p50_ms={q(0.5):.3f} p99_ms={q(0.99):.3f} max_ms={lat[-1] * 1000:.3f} "
        f"serve_cpu_ms_per_scrape={(serve1 - serve0) * 1000 / n:.3f} bytes={size}"
    )


if __name__ == "__main__":
    main(sys.argv)

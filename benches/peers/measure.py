"""Footprint of one running exporter: idle-scraped CPU, RSS, scrape latency and cost.

Usage: measure.py <name> <pid> <metrics-url> [idle-seconds] [burst]
Prints one JSON line. CPU comes from /proc/<pid>/stat (all threads; children included for
exporters that fork per scrape are measured by the caller instead).
"""
import json
import os
import sys
import time
import urllib.request

HZ = os.sysconf("SC_CLK_TCK")


def cpu_seconds(pid):
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    # utime, stime, cutime, cstime (fields 14-17, 1-based, after pid and comm)
    return sum(int(x) for x in fields[11:15]) / HZ


def status_field(pid, key):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith(key + ":"):
                return int(line.split()[1])
    return None


def status(pid, key):
    kib = status_field(pid, key)
    return None if kib is None else kib / 1024  # MiB


def scrape(url):
    t = time.perf_counter()
    body = urllib.request.urlopen(url, timeout=10).read()
    return (time.perf_counter() - t) * 1000, body


def main():
    name, pid, url = sys.argv[1], int(sys.argv[2]), sys.argv[3]
    idle = float(sys.argv[4]) if len(sys.argv) > 4 else 60
    burst = int(sys.argv[5]) if len(sys.argv) > 5 else 200
    # Wait until it serves, then let it settle.
    deadline = time.time() + 60
    while True:
        try:
            scrape(url)
            break
        except Exception:
            if time.time() > deadline:
                print(json.dumps({"name": name, "error": "never served"}))
                return
            time.sleep(0.5)
    time.sleep(5)
    # Idle-scraped, as Prometheus does: one scrape every 15 s.
    c0, t0 = cpu_seconds(pid), time.time()
    while time.time() - t0 < idle:
        scrape(url)
        time.sleep(min(15, max(0, idle - (time.time() - t0))))
    idle_cpu = (cpu_seconds(pid) - c0) / (time.time() - t0)
    # A burst of sequential scrapes.
    lat, body = [], b""
    c0, t0 = cpu_seconds(pid), time.time()
    for _ in range(burst):
        ms, body = scrape(url)
        lat.append(ms)
    wall = time.time() - t0
    burst_cpu = cpu_seconds(pid) - c0
    lat.sort()
    series = sum(1 for l in body.decode(errors="replace").splitlines() if l and not l.startswith("#"))
    print(json.dumps({
        "name": name,
        "idle_cpu_pct": idle_cpu * 100,
        "rss_mib": status(pid, "VmRSS"),
        "peak_rss_mib": status(pid, "VmHWM"),
        # Anonymous memory is the exporter's own; file-backed pages are mostly shared
        # libraries, libnvidia-ml.so included, which every NVML client maps alike.
        "rss_anon_mib": status(pid, "RssAnon"),
        "rss_file_mib": status(pid, "RssFile"),
        "threads": status_field(pid, "Threads"),
        "p50_ms": lat[len(lat) // 2],
        "p99_ms": lat[max(0, int(len(lat) * 0.99) - 1)],
        # The sampling the exporter does anyway during the burst is not the scrape's cost.
        "cpu_ms_per_scrape": max(0.0, burst_cpu - idle_cpu * wall) / burst * 1000,
        "bytes": len(body),
        "series": series,
    }))


if __name__ == "__main__":
    main()

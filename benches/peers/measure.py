"""Footprint of one running exporter and the processes it started (tessera's NVML workers):
idle-scraped CPU, PSS and RSS, scrape latency and cost, and where the idle CPU goes by thread.

Usage: measure.py <name> <pid> <metrics-url> [idle-seconds] [burst]
Prints one JSON line. CPU is every live process of the tree (utime + stime from /proc) plus
the children the root has reaped (exporters that fork a tool per scrape). PSS and RSS are
summed over the tree from smaps_rollup: PSS counts a page shared by n processes as 1/n in
each, so the sum is what the tree costs the node; the RSS sum counts shared pages once per
process.
"""
import json
import os
import re
import sys
import time
import urllib.request

HZ = os.sysconf("SC_CLK_TCK")


def children(pid):
    """Every process below `pid` (each listed under the thread that started it)."""
    out = []
    try:
        tasks = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return out
    for tid in tasks:
        try:
            with open(f"/proc/{pid}/task/{tid}/children") as f:
                kids = [int(c) for c in f.read().split()]
        except OSError:
            continue
        for k in kids:
            out.append(k)
            out.extend(children(k))
    return out


def tree(pid):
    return [pid] + children(pid)


def stat_fields(pid):
    with open(f"/proc/{pid}/stat") as f:
        return f.read().rsplit(")", 1)[1].split()


def cpu_seconds(root):
    """CPU of the root (with the children it reaped) and of every live descendant."""
    total = 0.0
    for pid in tree(root):
        try:
            fields = stat_fields(pid)
        except OSError:
            continue
        # utime, stime (fields 14-15, 1-based); cutime, cstime (16-17) for the root only, so a
        # live worker's CPU is not counted twice when it is reaped.
        n = 4 if pid == root else 2
        total += sum(int(x) for x in fields[11:11 + n]) / HZ
    return total


def cmdline(pid):
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            parts = f.read().split(b"\0")
    except OSError:
        return "?"
    words = [p.decode(errors="replace") for p in parts if p]
    return " ".join(words)[:80]


def rollup(pid):
    """smaps_rollup fields in KiB."""
    out = {}
    try:
        with open(f"/proc/{pid}/smaps_rollup") as f:
            for line in f:
                m = re.match(r"^(\w+):\s+(\d+) kB", line)
                if m:
                    out[m.group(1)] = int(m.group(2))
    except OSError:
        pass
    return out


def biggest_mappings(pid, n=6):
    """The mappings holding most of a process's PSS: what a worker costs, by library."""
    by = {}
    name = None
    try:
        with open(f"/proc/{pid}/smaps") as f:
            for line in f:
                if re.match(r"^[0-9a-f]+-[0-9a-f]+ ", line):
                    parts = line.split()
                    name = parts[5] if len(parts) > 5 else "[anon]"
                    name = os.path.basename(name) if name.startswith("/") else name
                elif line.startswith("Pss:"):
                    by[name] = by.get(name, 0) + int(line.split()[1])
    except OSError:
        return []
    return [(k, round(v / 1024, 2)) for k, v in sorted(by.items(), key=lambda kv: -kv[1])[:n]]


def thread_cpu(root):
    """CPU seconds per thread name over the tree (schedstat, ns); a worker's threads are
    prefixed `worker:`, digits kept (tessera-gpu0 and tessera-gpu1 stay apart)."""
    out = {}
    for pid in tree(root):
        prefix = "" if pid == root else "worker:"
        try:
            tids = os.listdir(f"/proc/{pid}/task")
        except OSError:
            continue
        for tid in tids:
            try:
                with open(f"/proc/{pid}/task/{tid}/comm") as f:
                    name = prefix + f.read().strip()
                with open(f"/proc/{pid}/task/{tid}/schedstat") as f:
                    ns = int(f.read().split()[0])
            except (OSError, ValueError, IndexError):
                continue
            out[name] = out.get(name, 0.0) + ns / 1e9
    return out


def scrape(url):
    t = time.perf_counter()
    body = urllib.request.urlopen(url, timeout=10).read()
    return (time.perf_counter() - t) * 1000, body


def metric_sum(body, prefix, needle=""):
    total, seen = 0.0, False
    for line in body.splitlines():
        if line.startswith(prefix) and needle in line:
            try:
                total += float(line.rsplit(" ", 1)[1])
                seen = True
            except (IndexError, ValueError):
                pass
    return total if seen else None


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
            if time.time() > deadline or not os.path.exists(f"/proc/{pid}"):
                print(json.dumps({"name": name, "error": "never served"}))
                return
            time.sleep(0.5)
    time.sleep(5)
    # Idle-scraped, as Prometheus does: one scrape every 15 s.
    c0, t0, th0 = cpu_seconds(pid), time.time(), thread_cpu(pid)
    while time.time() - t0 < idle:
        scrape(url)
        time.sleep(min(15, max(0, idle - (time.time() - t0))))
    idle_wall = time.time() - t0
    idle_cpu = (cpu_seconds(pid) - c0) / idle_wall
    th1 = thread_cpu(pid)
    threads = {k: (v - th0.get(k, 0.0)) * 1000 / idle_wall for k, v in th1.items()}
    # Memory after the idle period, every process of the tree.
    procs = []
    for p in tree(pid):
        r = rollup(p)
        procs.append({
            "pid": p,
            "cmd": cmdline(p),
            "pss_mib": r.get("Pss", 0) / 1024,
            "rss_mib": r.get("Rss", 0) / 1024,
            "pss_anon_mib": r.get("Pss_Anon", 0) / 1024,
            "pss_file_mib": r.get("Pss_File", 0) / 1024,
            "top_mappings_mib": biggest_mappings(p),
        })
    # A burst of sequential scrapes.
    lat, body = [], b""
    c0, t0 = cpu_seconds(pid), time.time()
    for _ in range(burst):
        ms, body = scrape(url)
        lat.append(ms)
    wall = time.time() - t0
    burst_cpu = cpu_seconds(pid) - c0
    lat.sort()
    text = body.decode(errors="replace")
    series = sum(1 for l in text.splitlines() if l and not l.startswith("#"))
    # tessera's counters are absent until they move: 0 for tessera, unknown for a peer.
    tessera = "tessera_build_info" in text
    zero = 0.0 if tessera else None
    with open(f"/proc/{pid}/status") as f:
        status = {l.split(":")[0]: l.split()[1] for l in f if len(l.split()) > 1}
    print(json.dumps({
        "name": name,
        "processes": len(procs),
        "idle_cpu_pct": idle_cpu * 100,
        "idle_seconds": idle_wall,
        "pss_mib": sum(p["pss_mib"] for p in procs),
        "rss_mib": sum(p["rss_mib"] for p in procs),
        "pss_anon_mib": sum(p["pss_anon_mib"] for p in procs),
        "pss_file_mib": sum(p["pss_file_mib"] for p in procs),
        "peak_rss_mib": int(status.get("VmHWM", 0)) / 1024,
        "threads": int(status.get("Threads", 0)),
        "p50_ms": lat[len(lat) // 2],
        "p99_ms": lat[max(0, int(len(lat) * 0.99) - 1)],
        # The sampling the exporter does anyway during the burst is not the scrape's cost.
        "cpu_ms_per_scrape": max(0.0, burst_cpu - idle_cpu * wall) / burst * 1000,
        "bytes": len(body),
        "series": series,
        # tessera's own health over the run (None for other exporters).
        "worker_restarts": metric_sum(text, "tessera_nvml_worker_restarts_total") or zero,
        "gpm_gate_busy": metric_sum(text, "tessera_nvml_errors_total", 'call="gpm_gate"') or zero,
        "gpus_up": metric_sum(text, "gpu_up{"),
        "idle_cpu_ms_per_s_by_thread": dict(sorted(threads.items(), key=lambda kv: -kv[1])),
        "per_process": procs,
    }))


if __name__ == "__main__":
    main()

"""Compare tessera's /metrics with nvidia-smi on the same GPU at about the same moment.

Usage: compare.py <label> <metrics-url>
Prints one table row per check: what tessera said, what nvidia-smi said, and whether it agrees
within the stated tolerance. Exit code 0 always: the table is the result.
"""
import re
import subprocess
import sys
import urllib.request

def scrape(url):
    text = urllib.request.urlopen(url, timeout=5).read().decode()
    series = []
    for line in text.splitlines():
        if line.startswith("#") or not line.strip():
            continue
        m = re.match(r'^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{(.*)\})? (\S+)', line)
        if not m:
            continue
        labels = dict(re.findall(r'(\w+)="((?:[^"\\]|\\.)*)"', m.group(3) or ""))
        series.append((m.group(1), labels, float(m.group(4))))
    return series

def smi(query, kind="gpu"):
    flag = "--query-gpu" if kind == "gpu" else "--query-compute-apps"
    out = subprocess.run(["nvidia-smi", f"{flag}={query}", "--format=csv,noheader,nounits"],
                         capture_output=True, text=True, check=True).stdout
    return [[c.strip() for c in l.split(",")] for l in out.strip().splitlines() if l.strip()]

def main():
    label, url = sys.argv[1], sys.argv[2]
    s = scrape(url)
    util_s, power_s, mem_s = (float(x) for x in smi("utilization.gpu,power.draw,memory.used")[0])
    apps = {int(r[0]): float(r[1]) for r in smi("pid,used_memory", "apps")}

    def one(name, **want):
        for n, l, v in s:
            if n == name and all(l.get(k) == w for k, w in want.items()):
                return v, l
        return None, None

    rows = []
    util_t, gl = one("gpu_utilization_ratio")
    rows.append(("GPU utilization %", util_t * 100 if util_t is not None else None, util_s, 10.0, "pts"))
    power_t, _ = one("gpu_power_watts")
    rows.append(("power W", power_t, power_s, 0.05 * max(power_s, 1), "5%"))
    mem_t, _ = one("gpu_memory_used_bytes")
    rows.append(("memory used MiB", mem_t / 2**20 if mem_t is not None else None, mem_s, 2.0, "MiB"))
    for pid, mib in sorted(apps.items()):
        v, pl = one("gpu_process_memory_used_bytes", pid=str(pid))
        rows.append((f"pid {pid} ({pl.get('type') if pl else '?'}) memory MiB", v / 2**20 if v is not None else None, mib, 0.0, "exact"))
    print(f"\n### {label}\n")
    print(f"sharing_mode label: {gl.get('sharing_mode') if gl else None}\n")
    print("| check | tessera | nvidia-smi | tolerance | agrees |\n|---|---|---|---|---|")
    for name, t, ref, tol, tol_s in rows:
        ok = t is not None and abs(t - ref) <= tol + 1e-9
        ts = "absent" if t is None else f"{t:.1f}"
        print(f"| {name} | {ts} | {ref:.1f} | {tol_s} | {'yes' if ok else 'NO'} |")
    procs = [(l.get("pid"), l.get("process"), l.get("type"), v) for n, l, v in s if n == "gpu_process_sm_utilization_ratio"]
    print("\nper-process SM share (tessera): " + ", ".join(f"pid {p} {c} {t} {v*100:.0f}%" for p, c, t, v in procs))
    gpm = {n: v for n, l, v in s if n in ("gpu_sm_activity_ratio", "gpu_sm_occupancy_ratio", "gpu_tensor_activity_ratio", "gpu_dram_bandwidth_utilization_ratio")}
    print("GPM (tessera): " + ", ".join(f"{k}={v*100:.1f}%" for k, v in sorted(gpm.items())))

if __name__ == "__main__":
    main()

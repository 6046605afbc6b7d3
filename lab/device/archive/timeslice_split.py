"""Per-process SM shares of time-sliced processes, three ways at once: tessera's series,
`nvidia-smi pmon` (1 s readings averaged over the same window) and NVML's raw
process-utilization samples read here through pynvml. Tells NVML's own sampling apart from
tessera's reading of it.

Usage: timeslice_split.py <tessera metrics url> [rounds] [window seconds]
Run beside a tessera started with the same --nvml.process-interval as the window.
"""
import re
import subprocess
import sys
import time
import urllib.request

import pynvml


def tessera_shares(url):
    body = urllib.request.urlopen(url, timeout=5).read().decode()
    out = {}
    for line in body.splitlines():
        if line.startswith("gpu_process_sm_utilization_ratio{"):
            pid = int(re.search(r'pid="(\d+)"', line).group(1))
            out[pid] = float(line.rsplit(" ", 1)[1]) * 100
    return out


def pmon(seconds):
    text = subprocess.run(["nvidia-smi", "pmon", "-s", "u", "-c", str(seconds)],
                          capture_output=True, text=True, timeout=seconds + 30).stdout
    sums = {}
    for line in text.splitlines():
        f = line.split()
        if not f or f[0].startswith("#") or len(f) < 4 or not f[1].isdigit():
            continue
        sm = float(f[3]) if f[3] not in ("-", "") else 0.0
        sums.setdefault(int(f[1]), []).append(sm)
    return {pid: sum(v) / seconds for pid, v in sums.items()}


def raw_nvml(handle, since_us):
    try:
        samples = pynvml.nvmlDeviceGetProcessUtilization(handle, since_us)
    except pynvml.NVMLError_NotFound:
        return {}
    per = {}
    for s in samples:
        per.setdefault(s.pid, []).append(s.smUtil)
    return {pid: (sum(v) / len(v), len(v)) for pid, v in per.items()}


def dump_raw(handle, seconds=3.0, every=0.25):
    """What one call returns, repeated: how many samples, of whom, how old."""
    print("| call at s | since | samples (pid: sm %, age ms) |\n|---|---|---|")
    t0 = time.time()
    last = 0
    while time.time() - t0 < seconds:
        now_us = int(time.time() * 1e6)
        for since, label in ((0, "0"), (last, "last seen")):
            try:
                samples = pynvml.nvmlDeviceGetProcessUtilization(handle, since)
            except pynvml.NVMLError_NotFound:
                samples = []
            text = ", ".join(f"{s.pid}: {s.smUtil}, {(now_us - s.timeStamp) / 1000:.0f}" for s in samples)
            print(f"| {time.time() - t0:.2f} | {label} | {text or 'none'} |")
            if samples:
                last = max(last, max(s.timeStamp for s in samples))
        time.sleep(every)


def main():
    url = sys.argv[1]
    rounds = int(sys.argv[2]) if len(sys.argv) > 2 else 4
    window = int(sys.argv[3]) if len(sys.argv) > 3 else 5
    pynvml.nvmlInit()
    handle = pynvml.nvmlDeviceGetHandleByIndex(0)
    dump_raw(handle)
    print()
    print("| round | pid | tessera SM % | pmon SM % (mean of 1 s readings) | raw NVML SM % (samples) |")
    print("|---|---|---|---|---|")
    for r in range(rounds):
        start_us = int(time.time() * 1e6)
        p = pmon(window)
        raw = raw_nvml(handle, start_us)
        # tessera's read that covers this window lands within one more interval.
        time.sleep(window + 1)
        t = tessera_shares(url)
        for pid in sorted(set(p) | set(t) | set(raw)):
            rv = raw.get(pid)
            rtxt = f"{rv[0]:.1f} ({rv[1]})" if rv else "none"
            print(f"| {r} | {pid} | {t.get(pid, float('nan')):.1f} | {p.get(pid, float('nan')):.1f} | {rtxt} |")
    dev = pynvml.nvmlDeviceGetUtilizationRates(handle).gpu
    print(f"\ndevice utilization at the end: {dev} %")


if __name__ == "__main__":
    main()

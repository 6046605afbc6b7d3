"""Reads one tessera every 1 s over a window: per pid, the published SM share (and how often it
was withheld), the CUDA probe's busy share, and from /debug/attribution how often tessera would
have counted the process idle (quiet, or the device idle) or unknown (withheld).
Usage: tessera_watch.py BASE_URL START_AT DURATION OUT.json [SKIP_SECONDS]
SKIP_SECONDS (default 4): reads begin this long after START_AT, once tessera's trailing window
(and, with the probe, its 2 s timeline lag) lies inside the run."""
import sys, time, json, re, urllib.request, collections
base, start_at, dur, out = sys.argv[1], float(sys.argv[2]), float(sys.argv[3]), sys.argv[4]
skip = float(sys.argv[5]) if len(sys.argv) > 5 else 4
t_begin, t_end = start_at + skip, start_at + dur - 1
share, busy = collections.defaultdict(list), collections.defaultdict(list)
kernels = {}  # pid -> [(time, kernels_total)], first and every later read
verdict = collections.defaultdict(collections.Counter)
unattributed, methods, whys, reads = [], collections.Counter(), collections.Counter(), 0
disputes = collections.Counter()  # why the probes' claims were not believed, per read
series, traced_pct = [], []  # per read: (t, {pid: busy}); the sampled share a why names
# The device's own gauges as this instance publishes them, per GPU index: NVML's utilization
# (a ~167 ms snapshot) and GPM's SM activity (over the sample interval).
device_gauges = collections.defaultdict(lambda: collections.defaultdict(list))
DEVICE_GAUGES = {"gpu_utilization_ratio": "nvml_util", "gpu_sm_activity_ratio": "gpm_sm_activity"}
# Per pid, each step of the time-sliced split (/debug/attribution's probe_stages), and the
# device's figure and the cap the split was measured against.
stages, device, scale = collections.defaultdict(lambda: collections.defaultdict(list)), [], []
while time.time() < t_begin: time.sleep(0.01)
while time.time() < t_end:
    t = time.time()
    try:
        body = urllib.request.urlopen(base + "/metrics", timeout=5).read().decode()
        dbg = json.loads(urllib.request.urlopen(base + "/debug/attribution", timeout=5).read())
    except Exception:
        time.sleep(1); continue
    reads += 1
    busy_now = {}
    for line in body.splitlines():
        m = re.match(r'(gpu_utilization_ratio|gpu_sm_activity_ratio)\{([^}]*)\} (\S+)', line)
        if m:
            gpu = re.search(r'gpu="(\d+)"', m.group(2))
            if gpu: device_gauges[gpu.group(1)][DEVICE_GAUGES[m.group(1)]].append(float(m.group(3)))
            continue
        m = re.match(r'(gpu_process_sm_utilization_ratio|gpu_process_busy_ratio|gpu_unattributed_utilization_ratio|gpu_process_kernels_total)\{([^}]*)\} (\S+)', line)
        if not m: continue
        name, labels, v = m.groups()
        pid = re.search(r'pid="(\d+)"', labels)
        if name == "gpu_process_kernels_total":
            kernels.setdefault(pid.group(1), [(t, float(v))]).append((t, float(v))); continue
        if name == "gpu_process_sm_utilization_ratio": share[pid.group(1)].append(float(v))
        elif name == "gpu_process_busy_ratio":
            busy[pid.group(1)].append(float(v)); busy_now[pid.group(1)] = float(v)
        else: unattributed.append(float(v))
    for g in dbg.get("gpus", []):
        c = g.get("compute", {})
        methods[c.get("method")] += 1
        for r in c.get("disputed", []): disputes[str(r)] += 1
        if c.get("method") == "probe":
            whys[c.get("why", "")[:60]] += 1
            m = re.search(r"a probe traced (\d+) %", c.get("why", ""))
            if m: traced_pct.append(float(m.group(1)))
        if c.get("device_activity") is not None: device.append(c["device_activity"])
        if c.get("probe_scale") is not None: scale.append(c["probe_scale"])
        for pid, st in c.get("probe_stages", {}).items():
            for k, v in st.items(): stages[str(pid)][k].append(v)
        for pid in c.get("quiet", []): verdict[str(pid)]["idle"] += 1
        for pid in c.get("candidates", []):
            verdict[str(pid)]["idle" if c.get("method") == "idle" else "active"] += 1
    series.append((round(t, 2), busy_now))
    time.sleep(max(0, 1 - (time.time() - t)))
avg = lambda v: round(sum(v) / len(v), 4) if v else None
json.dump({"reads": reads,
           "share": {p: avg(v) for p, v in share.items()},
           "share_present": {p: len(v) for p, v in share.items()},
           "busy": {p: avg(v) for p, v in busy.items()},
           "idle_fraction": {p: round(c["idle"] / max(1, sum(c.values())), 3) for p, c in verdict.items()},
           "kernels_per_s": {p: round((v[-1][1] - v[0][1]) / (v[-1][0] - v[0][0]), 1)
                            for p, v in kernels.items() if v[-1][0] > v[0][0]},
           "unattributed": avg(unattributed), "methods": dict(methods), "whys": dict(whys),
           "disputes": dict(disputes),
           "traced_pct": avg(traced_pct), "device": avg(device), "scale": avg(scale),
           "device_gauges": {g: {k: avg(v) for k, v in d.items()} for g, d in device_gauges.items()},
           "idle_reads": {p: c["idle"] for p, c in verdict.items()},
           "verdict_reads": {p: sum(c.values()) for p, c in verdict.items()},
           "stages": {p: {k: avg(v) for k, v in st.items()} for p, st in stages.items()},
           "series": series}, open(out, "w"), indent=1)

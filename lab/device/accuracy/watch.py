"""During a window: scrape tessera every 1 s; read NVML per-process utilization three ways
(v1 API every 1 s, v1 every 0.1 s, v2 ProcessesUtilizationInfo every 0.1 s, each with its own
device-wide last-seen mark); device utilization every 0.1 s; MPS process list.
Usage: watch2.py URL START_AT DURATION OUT.json [SNAPSHOT_FILE]"""
import sys, time, json, re, urllib.request, collections, threading
import pynvml as n
url, start_at, dur, out = sys.argv[1], float(sys.argv[2]), float(sys.argv[3]), sys.argv[4]
snap = sys.argv[5] if len(sys.argv) > 5 else None
n.nvmlInit(); h = n.nvmlDeviceGetHandleByIndex(0)
t_begin, t_end = start_at + 2, start_at + dur - 1
res = {}
def reader(name, period, fn):
    vals = collections.defaultdict(list); ts = collections.defaultdict(set); last = 0; errs = collections.Counter(); calls = 0
    while time.time() < t_begin: time.sleep(0.01)
    while time.time() < t_end:
        t = time.time(); calls += 1
        try:
            for s in fn(last):
                vals[str(s.pid)].append(s.smUtil); ts[str(s.pid)].add(s.timeStamp); last = max(last, s.timeStamp)
        except n.NVMLError as ex:
            errs[str(ex)] += 1
        time.sleep(max(0, period - (time.time() - t)))
    res[name] = {"avg": {p: round(sum(v) / len(v) / 100, 4) for p, v in vals.items()},
                 "samples": {p: len(v) for p, v in vals.items()}, "distinct_ts": {p: len(v) for p, v in ts.items()},
                 "calls": calls, "errors": dict(errs)}
def v1(last): return n.nvmlDeviceGetProcessUtilization(h, last)
def v2(last): return n.nvmlDeviceGetProcessesUtilizationInfo(h, last)
def device():
    u = []; mps = set(); comp = set()
    while time.time() < t_begin: time.sleep(0.01)
    while time.time() < t_end:
        u.append(n.nvmlDeviceGetUtilizationRates(h).gpu)
        try: mps |= {p.pid for p in n.nvmlDeviceGetMPSComputeRunningProcesses(h)}
        except n.NVMLError: pass
        comp |= {p.pid for p in n.nvmlDeviceGetComputeRunningProcesses(h)}
        time.sleep(0.1)
    res["device_util_0.1s"] = round(sum(u) / len(u) / 100, 4); res["mps_pids"] = sorted(mps); res["compute_pids"] = sorted(comp)
def tessera():
    vals = collections.defaultdict(list); dev = collections.defaultdict(list); kinds = {}
    while time.time() < t_begin: time.sleep(0.01)
    took = False
    while time.time() < t_end:
        t = time.time()
        try:
            body = urllib.request.urlopen(url, timeout=5).read().decode()
            if snap and not took and t > t_begin + 10: open(snap, "w").write(body); took = True
            for line in body.splitlines():
                m = re.match(r'(gpu_process_sm_utilization_ratio|gpu_process_memory_used_bytes|gpu_utilization_ratio|gpu_sm_activity_ratio)\{([^}]*)\} (\S+)', line)
                if not m: continue
                name, labels, v = m.groups()
                pid = re.search(r'pid="(\d+)"', labels)
                if name == "gpu_process_sm_utilization_ratio": vals[pid.group(1)].append(float(v))
                elif name == "gpu_process_memory_used_bytes": kinds[pid.group(1)] = re.search(r'type="([^"]*)"', labels).group(1) if 'type="' in labels else "?"
                else: dev[name].append(float(v))
        except Exception as ex:
            dev["errors"].append(0)
        time.sleep(max(0, 1 - (time.time() - t)))
    res["tessera"] = {"avg": {p: round(sum(v) / len(v), 4) for p, v in vals.items()}, "type": kinds,
                      "device": {k: round(sum(v) / len(v), 4) for k, v in dev.items() if v}}
th = [threading.Thread(target=reader, args=("v1_1s", 1.0, v1)), threading.Thread(target=reader, args=("v1_0.1s", 0.1, v1)),
      threading.Thread(target=reader, args=("v2_0.1s", 0.1, v2)), threading.Thread(target=device)]
for t in th: t.start()
for t in th: t.join()
json.dump(res, open(out, "w"), indent=1)

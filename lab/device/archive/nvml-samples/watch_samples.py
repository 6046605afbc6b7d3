"""How well one NVML read a second tells a GPU's busy fraction: the snapshot
(nvmlDeviceGetUtilizationRates) against the mean of every utilization sample the driver kept
since the previous read (nvmlDeviceGetSamples, NVML_GPU_UTILIZATION_SAMPLES), with a 0.1 s
snapshot poll as a third view. Also records the samples' spacing and how many the driver keeps.
Usage: watch_samples.py START_AT DURATION OUT.json [TESSERA_METRICS_URL]
With a URL, tessera's gpu_utilization_ratio for GPU 0 is read every second as well."""
import json, re, sys, threading, time, urllib.request
import pynvml as n

start_at, dur, out = float(sys.argv[1]), float(sys.argv[2]), sys.argv[3]
n.nvmlInit()
h = n.nvmlDeviceGetHandleByIndex(0)
GPU = n.NVML_GPU_UTILIZATION_SAMPLES
url = sys.argv[4] if len(sys.argv) > 4 else None
res = {"snapshot_1s": [], "samples_1s": [], "sample_counts": [], "spacing_us": [], "fast": [], "tessera": []}


def samples_since(last):
    try:
        _, s = n.nvmlDeviceGetSamples(h, GPU, last)
    except n.NVMLError as e:
        res.setdefault("errors", []).append(str(e))
        return []
    return [(x.timeStamp, x.sampleValue.uiVal) for x in s]


def fast():
    while time.time() < start_at: time.sleep(0.005)
    while time.time() < start_at + dur:
        res["fast"].append(n.nvmlDeviceGetUtilizationRates(h).gpu)
        time.sleep(0.1)


def tessera():
    while time.time() < start_at: time.sleep(0.005)
    while time.time() < start_at + dur:
        t = time.time()
        try:
            body = urllib.request.urlopen(url, timeout=2).read().decode()
            m = re.search(r'^gpu_utilization_ratio\{[^}]*gpu="0"[^}]*\} (\S+)$', body, re.M)
            if m: res["tessera"].append(float(m.group(1)) * 100)
        except Exception as e:
            res.setdefault("errors", []).append("tessera: " + str(e))
        time.sleep(max(0, 1 - (time.time() - t)))


whole = samples_since(0)
res["buffer_when_started"] = len(whole)
res["buffer_span_us"] = (whole[-1][0] - whole[0][0]) if len(whole) > 1 else 0
th = threading.Thread(target=fast); th.start()
tt = threading.Thread(target=tessera) if url else None
if tt: tt.start()
while time.time() < start_at: time.sleep(0.005)
# Start the mark at the window's start, so the first read covers the window's first second,
# not the lead before it.
now = samples_since(0)
last = now[-1][0] if now else 0
while time.time() < start_at + dur:
    t = time.time()
    res["snapshot_1s"].append(n.nvmlDeviceGetUtilizationRates(h).gpu)
    got = [s for s in samples_since(last) if s[0] > last]
    res["sample_counts"].append(len(got))
    if got:
        # Weight each sample by the time since the one before it: it covers that period.
        prev, num, den = last, 0.0, 0.0
        for ts, v in got:
            w = ts - prev if prev else 0
            res["spacing_us"].append(w)
            num += v * w; den += w; prev = ts
        res["samples_1s"].append(num / den if den else sum(v for _, v in got) / len(got))
        last = got[-1][0]
    time.sleep(max(0, 1 - (time.time() - t)))
th.join()
if tt: tt.join()
mean = lambda v: round(sum(v) / len(v) / 100, 4) if v else None
sp = sorted(res["spacing_us"][1:]) or [0]
summary = {"snapshot_1s": mean(res["snapshot_1s"]), "samples_1s": mean(res["samples_1s"]),
           "snapshot_0.1s": mean(res["fast"]), "tessera_1s": mean(res["tessera"]), "reads": len(res["snapshot_1s"]),
           "samples_per_read_median": sorted(res["sample_counts"])[len(res["sample_counts"]) // 2] if res["sample_counts"] else 0,
           "spacing_us_median": sp[len(sp) // 2], "spacing_us_min": sp[0], "spacing_us_max": sp[-1],
           "buffer_when_started": res["buffer_when_started"], "buffer_span_us": res["buffer_span_us"],
           "errors": res.get("errors", [])[:3]}
json.dump({"summary": summary, "raw": res}, open(out, "w"))
print(json.dumps(summary))

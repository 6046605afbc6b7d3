# Raw NVML GPM answers, printed with their return codes: what tessera's sampler sees.
import sys, time
import pynvml as n
n.nvmlInit()
h = n.nvmlDeviceGetHandleByIndex(0)
label = sys.argv[1]
rounds = int(sys.argv[2])
try:
    s = n.nvmlGpmQueryDeviceSupport(h)
    print(label, "support", s.isSupportedDevice, flush=True)
except n.NVMLError as e:
    print(label, "support error", e, flush=True)
ids = [1, 2, 3, 5, 10, 11, 12, 13, 20, 21, 60, 61]
for r in range(rounds):
    t = time.time()
    try:
        s1 = n.nvmlGpmSampleAlloc(); s2 = n.nvmlGpmSampleAlloc()
        n.nvmlGpmSampleGet(h, s1)
        time.sleep(0.5)
        n.nvmlGpmSampleGet(h, s2)
    except n.NVMLError as e:
        print(label, r, "sample_get error", repr(e), flush=True)
        time.sleep(0.5)
        continue
    mg = n.c_nvmlGpmMetricsGet_t()
    mg.version = n.NVML_GPM_METRICS_GET_VERSION
    mg.numMetrics = len(ids)
    mg.sample1 = s1; mg.sample2 = s2
    for i, m in enumerate(ids):
        mg.metrics[i].metricId = m
    try:
        n.nvmlGpmMetricsGet(mg)
        out = " ".join(f"{ids[i]}:{mg.metrics[i].nvmlReturn}:{mg.metrics[i].value:.1f}" for i in range(len(ids)))
        print(label, r, "metrics", out, flush=True)
    except n.NVMLError as e:
        print(label, r, "metrics_get error", repr(e), flush=True)
    n.nvmlGpmSampleFree(s1); n.nvmlGpmSampleFree(s2)

"""Where a lone process's burst time goes: the duty.py schedule (DUTY of 50 ms in bf16 matmuls)
with a CUDA event before every op and after the last, so each op's GPU time, the first op's
(wake-up included) and the whole burst are known apart. With the CUDA probe loaded, compare
with tessera's probe busy ratio over the same seconds.
Usage: anatomy.py DUTY START_AT DURATION OUT.json"""
import torch, time, sys, json, os, statistics
duty, start_at, dur, out = float(sys.argv[1]), float(sys.argv[2]), float(sys.argv[3]), sys.argv[4]
x = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16)
op = lambda: torch.mm(x, x)
for _ in range(5): op()
torch.cuda.synchronize()
s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
s.record()
for _ in range(100): op()
e.record(); torch.cuda.synchronize()
calib = s.elapsed_time(e) / 100
k = round(duty * 50 / calib)
evs = [torch.cuda.Event(enable_timing=True) for _ in range(k + 1)]
while time.time() < start_at: time.sleep(0.01)
t0 = time.time(); nxt = t0; first, rest, burst, n = [], [], 0.0, 0
while time.time() - t0 < dur:
    for i in range(k):
        evs[i].record(); op()
    evs[k].record(); torch.cuda.synchronize()
    ms = [evs[i].elapsed_time(evs[i + 1]) for i in range(k)]
    first.append(ms[0]); rest.extend(ms[1:]); burst += sum(ms); n += k
    nxt += 0.05
    d = nxt - time.time()
    if d > 0: time.sleep(d)
wall = time.time() - t0
json.dump({"pid": os.getpid(), "probe": bool(os.environ.get("CUDA_INJECTION64_PATH")),
           "calib_ms": round(calib, 4), "ops_per_burst": k, "ops": n, "wall_s": round(wall, 3),
           "first_op_ms": round(statistics.mean(first), 4), "first_op_ms_max": round(max(first), 4),
           "other_op_ms": round(statistics.mean(rest), 4), "other_op_ms_p10_p90":
           [round(v, 4) for v in statistics.quantiles(rest, n=10)[::8]],
           "burst_share": round(burst / 1000 / wall, 4),
           "truth_calib": round(n * calib / 1000 / wall, 4)}, open(out, "w"))

"""A CUDA workload of a known shape that times its own GPU work with CUDA events.
Usage: workload.py MODE DURATION OUT.json [START_AT]
  cont    bf16 8192² matmuls back to back (the GPU never idles; a sync every 20 ops bounds the queue)
  duty50  those matmuls for 25 ms of every 50 ms
  longk   one 2 s spin kernel (torch.cuda._sleep), then 1 s idle, repeated
  launch  10 µs elementwise kernels back to back (launch-bound)
Writes the GPU busy share by events (sum of per-batch event times / wall) and kernels launched."""
import torch, time, sys, json, os
mode, dur, out = sys.argv[1], float(sys.argv[2]), sys.argv[3]
x = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16)
small = torch.randn(1024, device="cuda")
for _ in range(3): torch.mm(x, x)
torch.cuda.synchronize()
# cycles per second for the spin kernel, measured, not assumed
s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
s.record(); torch.cuda._sleep(100_000_000); e.record(); torch.cuda.synchronize()
cycles_per_ms = 100_000_000 / s.elapsed_time(e)
if len(sys.argv) > 4:
    while time.time() < float(sys.argv[4]): time.sleep(0.01)
t0 = time.time(); gpu_ms = 0.0; kernels = 0; nxt = t0
while time.time() - t0 < dur:
    s.record()
    if mode == "cont":
        for _ in range(20): torch.mm(x, x)
        kernels += 20
    elif mode == "duty50":
        for _ in range(17): torch.mm(x, x)
        kernels += 17
    elif mode == "longk":
        torch.cuda._sleep(int(2000 * cycles_per_ms)); kernels += 1
    else:
        for _ in range(1000): small.mul_(1.0)
        kernels += 1000
    e.record(); torch.cuda.synchronize(); gpu_ms += s.elapsed_time(e)
    if mode == "duty50":
        nxt += 0.05; d = nxt - time.time()
        if d > 0: time.sleep(d)
    elif mode == "longk":
        time.sleep(1.0)
wall = time.time() - t0
json.dump({"pid": os.getpid(), "mode": mode, "t0": t0, "wall_s": wall, "events_share": gpu_ms / 1000 / wall,
           "kernels": kernels}, open(out, "w"))

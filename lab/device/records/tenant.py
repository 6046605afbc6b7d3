"""A tenant that keeps the GPU busy DUTY of the time: each 50 ms it runs enough 4096² bf16
matmuls for DUTY × 50 ms, then sleeps. Writes the wall time of its first kernel to FIRST
(before that it only imports torch and makes its context), then runs SECONDS.
usage: tenant.py DUTY SECONDS FIRST"""
import sys, time, torch
duty, secs, first = float(sys.argv[1]), float(sys.argv[2]), sys.argv[3]
x = torch.randn(4096, 4096, device="cuda", dtype=torch.bfloat16)
t = time.time(); torch.mm(x, x); torch.cuda.synchronize()
open(first, "w").write(f"{t}\n")
s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
s.record()
for _ in range(50): torch.mm(x, x)
e.record(); torch.cuda.synchronize()
op_ms = s.elapsed_time(e) / 50
k = max(1, round(duty * 50 / op_ms))
t0 = time.time(); nxt = t0
while time.time() - t0 < secs:
    for _ in range(k): torch.mm(x, x)
    torch.cuda.synchronize()
    nxt += 0.05
    d = nxt - time.time()
    if d > 0: time.sleep(d)

"""A launch-bound loop: a tiny elementwise kernel back to back, timed in blocks of 1000
launches, after a 3 s warm-up. The launching thread is pinned to one CPU after cuInit
(PIN_MAIN), as in docs/validation.md's in-process series. Prints one JSON line: median and
10th percentile of the blocks, in µs per launch.   usage: launch_loop.py NAME SECONDS"""
import json, os, sys, time
import torch
name, secs = sys.argv[1], float(sys.argv[2])
x = torch.randn(1024, device="cuda")
torch.cuda.synchronize()
if os.environ.get("PIN_MAIN"):
    os.sched_setaffinity(0, {int(os.environ["PIN_MAIN"])})
t = time.perf_counter()
while time.perf_counter() - t < 3.0:
    for _ in range(1000): x.mul_(1.0)
torch.cuda.synchronize()
blocks = []
t_end = time.perf_counter() + secs
while time.perf_counter() < t_end:
    b = time.perf_counter()
    for _ in range(1000): x.mul_(1.0)
    blocks.append((time.perf_counter() - b) * 1e3)  # ms per 1000 = µs per launch
torch.cuda.synchronize()
blocks.sort()
print(json.dumps({"name": name, "pid": os.getpid(), "blocks": len(blocks),
                  "median_us": round(blocks[len(blocks) // 2], 3),
                  "p10_us": round(blocks[len(blocks) // 10], 3)}), flush=True)

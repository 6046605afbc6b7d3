"""Kernel-time truth for the tenants: how long one bf16 N×N matmul's kernels run alone, from
CUPTI's kernel records under PyTorch's profiler, in a process without the probe (the two would
compete for CUPTI's callbacks). Also its CUDA-event time, and the SM clock meanwhile.

    calib.py --size N --out FILE.json
"""
import argparse
import json
import subprocess
import time

import torch


def sm_clock():
    try:
        out = subprocess.run(["nvidia-smi", "--query-gpu=clocks.sm", "--format=csv,noheader,nounits",
                              "-i", "0"], capture_output=True, text=True, timeout=10).stdout
        return float(out.split()[0])
    except Exception:
        return None


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--size", type=int, default=8192)
    ap.add_argument("--out", required=True)
    ap.add_argument("--n", type=int, default=200)
    a = ap.parse_args()
    x = torch.randn(a.size, a.size, device="cuda", dtype=torch.bfloat16)
    y = torch.randn(a.size, a.size, device="cuda", dtype=torch.bfloat16)
    for _ in range(50):
        x @ y
    torch.cuda.synchronize()
    e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    e0.record()
    for _ in range(a.n):
        x @ y
    e1.record()
    torch.cuda.synchronize()
    clock = sm_clock()
    event_ms = e0.elapsed_time(e1) / a.n
    from torch.profiler import ProfilerActivity, profile
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(a.n):
            x @ y
        torch.cuda.synchronize()
    us = 0.0
    for ev in prof.key_averages():
        v = getattr(ev, "self_device_time_total", None)
        if v is None:
            v = getattr(ev, "self_cuda_time_total", 0)
        us += v
    kernel_ms = us / 1000 / a.n
    res = {"size": a.size, "n": a.n, "kernel_ms": kernel_ms, "event_ms": event_ms,
           "kernel_over_event": kernel_ms / event_ms if event_ms else None, "sm_clock_mhz": clock,
           "torch": torch.__version__, "cuda": torch.version.cuda, "t": time.time()}
    json.dump(res, open(a.out, "w"))
    print(json.dumps(res))


if __name__ == "__main__":
    main()

"""Kernel-time truth for the tenants: how long one bf16 N×N matmul's kernels run alone, from
CUPTI's kernel records under PyTorch's profiler, in a process without the probe (the two would
compete for CUPTI's callbacks). Also its CUDA-event time, and the SM clock meanwhile.

    calib.py --size N --out FILE.json [--duties 0.35,0.45]

A matmul run back to back holds the GPU at its power limit, where the SM clock is lower than
under the tenants' duty cycles: each `--duties` value also times the kernels issued in 100-ms
periods at that duty, the way the tenants issue them, with the window's start and end (the
driver's clock log says the clock over it), so the truth can be taken at the serving clock.
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


def kernel_us(prof):
    us = 0.0
    for ev in prof.key_averages():
        v = getattr(ev, "self_device_time_total", None)
        if v is None:
            v = getattr(ev, "self_cuda_time_total", 0)
        us += v
    return us


def at_duty(x, y, duty, kernel_ms, warm_periods=30, periods=20, period_s=0.1):
    """Kernel time per matmul issued at `duty` in periods of `period_s`, under the profiler."""
    from torch.profiler import ProfilerActivity, profile
    per = max(1, round(duty * period_s * 1000 / kernel_ms))

    def run(n):
        for _ in range(n):
            t0 = time.time()
            for _ in range(per):
                x @ y
            torch.cuda.synchronize()
            time.sleep(max(0.0, t0 + period_s - time.time()))

    run(warm_periods)
    t0 = time.time()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        run(periods)
    t1 = time.time()
    return {"duty": duty, "per_period": per, "kernel_ms": kernel_us(prof) / 1000 / (per * periods),
            "t0": t0, "t1": t1}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--size", type=int, default=8192)
    ap.add_argument("--out", required=True)
    ap.add_argument("--n", type=int, default=200)
    ap.add_argument("--duties", default="")
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
    kernel_ms = kernel_us(prof) / 1000 / a.n
    duties = [at_duty(x, y, float(d), kernel_ms) for d in a.duties.split(",") if d]
    res = {"size": a.size, "n": a.n, "kernel_ms": kernel_ms, "event_ms": event_ms,
           "kernel_over_event": kernel_ms / event_ms if event_ms else None, "sm_clock_mhz": clock,
           "duties": duties, "torch": torch.__version__, "cuda": torch.version.cuda, "t": time.time()}
    json.dump(res, open(a.out, "w"))
    print(json.dumps(res))


if __name__ == "__main__":
    main()

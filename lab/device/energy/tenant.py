"""A tenant for the energy validation: a fixed amount of bf16 matmul work every 100 ms.

    tenant.py --size N --duty D --seconds S --ready FILE --go FILE --report FILE [--per-period K]

Warms up, times one matmul alone, and sets the work per 100 ms period to what fills `duty` of
it (or takes `--per-period`, so a tenant does the same work alone and shared). Writes
{"per_period": K, "matmul_s": t} to `--ready`, waits for `--go` to exist, then runs `seconds`:
each period it launches K matmuls, waits for them, and sleeps out the period (an overrun
starts the next one at once, so work is never skipped). Work, not busy time, is what stays
fixed between the alone and the shared runs: the energy the work draws is what is compared.
Writes what it did to `--report`. `--dry` does the same with sleeps (no torch, no GPU).
"""
import argparse
import json
import os
import time


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--size", type=int, default=8192)
    ap.add_argument("--duty", type=float, required=True)
    ap.add_argument("--seconds", type=float, required=True)
    ap.add_argument("--per-period", type=int, default=0)
    ap.add_argument("--ready", required=True)
    ap.add_argument("--go", required=True)
    ap.add_argument("--report", required=True)
    ap.add_argument("--dry", action="store_true")
    a = ap.parse_args()
    period = 0.1
    if a.dry:
        matmul_s = 0.002

        def work(k):
            time.sleep(k * matmul_s)
    else:
        import torch
        x = torch.randn(a.size, a.size, device="cuda", dtype=torch.bfloat16)
        y = torch.randn(a.size, a.size, device="cuda", dtype=torch.bfloat16)
        for _ in range(20):
            x @ y
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        for _ in range(50):
            x @ y
        torch.cuda.synchronize()
        matmul_s = (time.perf_counter() - t0) / 50

        def work(k):
            for _ in range(k):
                x @ y
            torch.cuda.synchronize()
    k = a.per_period or max(1, round(a.duty * period / matmul_s))
    with open(a.ready + ".tmp", "w") as f:
        json.dump({"per_period": k, "matmul_s": matmul_s, "pid": os.getpid()}, f)
    os.replace(a.ready + ".tmp", a.ready)
    while not os.path.exists(a.go):
        time.sleep(0.01)
    start = time.time()
    end = start + a.seconds
    periods = overruns = 0
    next_start = start
    while time.time() < end:
        work(k)
        periods += 1
        next_start += period
        rest = next_start - time.time()
        if rest > 0:
            time.sleep(rest)
        else:
            overruns += 1
            next_start = time.time()
    with open(a.report, "w") as f:
        json.dump({"per_period": k, "matmul_s": matmul_s, "periods": periods, "overruns": overruns,
                   "matmuls": periods * k, "start": start, "end": time.time()}, f)


if __name__ == "__main__":
    main()

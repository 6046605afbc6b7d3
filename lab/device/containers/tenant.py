"""A CUDA tenant in a container (driver.py): a fixed amount of bf16 matmul work every 100 ms.

    tenant.py --size N --duty D --seconds S --ready FILE --go FILE --progress FILE [--per-period K] [--worker]

Warms up, times one matmul, and sets the work per period to what fills `duty` of it alone (or
takes `--per-period`). Writes to `--ready` what the container sees (its PID, its cgroup, the
probe's environment, whether the socket is there), waits for `--go`, then runs `seconds`,
appending `<unix time> <matmuls so far>` to `--progress` after every period.
`--dry` (no torch, no GPU): loads the probe itself as the CUDA driver would, with the stand-in
CUPTI that TESSERA_PROBE_CUPTI names, and sleeps instead of computing.
"""
import argparse
import ctypes
import json
import os
import time


# A worker process of its own (not a fork: CUDA cannot be used in a forked child), loading the
# probe as its own cuInit would; it connects to the socket by itself.
WORKER = """
import ctypes, os, sys, time
path = os.environ.get("CUDA_INJECTION64_PATH")
if path:
    lib = ctypes.CDLL(path)
    lib.InitializeInjection()
time.sleep(float(sys.argv[1]))
"""


def seen():
    def read(path):
        try:
            return open(path).read().strip()
        except OSError as e:
            return f"unreadable: {e}"
    status = read("/proc/self/status")
    return {
        "pid": os.getpid(),
        "nspid": next((l.split(":", 1)[1].strip() for l in status.splitlines() if l.startswith("NSpid")), None),
        "cgroup": read("/proc/self/cgroup"),
        "uid": os.getuid(),
        "injection": os.environ.get("CUDA_INJECTION64_PATH"),
        "probe_socket_env": os.environ.get("TESSERA_PROBE_SOCKET"),
        "socket_exists": os.path.exists("/run/tessera/probe.sock"),
        "library_exists": os.path.exists(os.environ.get("CUDA_INJECTION64_PATH") or "/nonexistent"),
    }


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--size", type=int, default=8192)
    ap.add_argument("--duty", type=float, required=True)
    ap.add_argument("--seconds", type=float, required=True)
    ap.add_argument("--per-period", type=int, default=0)
    ap.add_argument("--ready", required=True)
    ap.add_argument("--go", required=True)
    ap.add_argument("--progress", required=True)
    ap.add_argument("--offset", type=float, default=0.0,
                    help="seconds after the go signal before the first period: another phase of the same period")
    ap.add_argument("--dry", action="store_true")
    ap.add_argument("--worker", action="store_true",
                    help="start a worker process that loads the probe too, as a spawned data loader would")
    a = ap.parse_args()
    period = 0.1
    if a.dry:
        matmul_s = 0.002
        # As the CUDA driver: no variable, no injection.
        initialized = None
        if os.environ.get("CUDA_INJECTION64_PATH"):
            lib = ctypes.CDLL(os.environ["CUDA_INJECTION64_PATH"])
            init = lib.InitializeInjection
            init.restype = ctypes.c_int
            initialized = init()

        def work(k):
            time.sleep(k * matmul_s)
    else:
        import torch
        initialized = None
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
    worker = None
    if a.worker:
        import subprocess
        import sys
        worker = subprocess.Popen([sys.executable, "-c", WORKER, str(a.seconds + 30)])
    k = a.per_period or max(1, round(a.duty * period / matmul_s))
    with open(a.ready + ".tmp", "w") as f:
        json.dump({"per_period": k, "matmul_s": matmul_s, "initialized": initialized,
                   "worker_pid": worker.pid if worker else None, **seen()}, f)
    os.replace(a.ready + ".tmp", a.ready)
    while not os.path.exists(a.go):
        time.sleep(0.01)
    time.sleep(a.offset)
    progress = open(a.progress, "w", buffering=1)
    start = time.time()
    end = start + a.seconds
    done = 0
    progress.write(f"{start:.3f} 0\n")
    next_start = start
    while time.time() < end:
        work(k)
        done += k
        progress.write(f"{time.time():.3f} {done}\n")
        next_start += period
        rest = next_start - time.time()
        if rest > 0:
            time.sleep(rest)
        else:
            next_start = time.time()
    progress.close()
    if worker:
        worker.kill()
        worker.wait()


if __name__ == "__main__":
    main()

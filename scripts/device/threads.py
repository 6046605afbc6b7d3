"""Where a running process spends its CPU, thread by thread, over a window.

Usage: threads.py <pid> [seconds]
Prints one markdown table: per thread name, ms of CPU per second (from schedstat, in ns)."""
import os
import sys
import time


def snapshot(pid):
    out = {}
    for tid in os.listdir(f"/proc/{pid}/task"):
        try:
            with open(f"/proc/{pid}/task/{tid}/comm") as f:
                name = f.read().strip()
            with open(f"/proc/{pid}/task/{tid}/schedstat") as f:
                ns = int(f.read().split()[0])
        except OSError:
            continue
        out[tid] = (name, ns)
    return out


def main():
    pid = int(sys.argv[1])
    seconds = float(sys.argv[2]) if len(sys.argv) > 2 else 60
    a, t0 = snapshot(pid), time.time()
    time.sleep(seconds)
    b, wall = snapshot(pid), time.time() - t0
    per = {}
    for tid, (name, ns) in b.items():
        per[name] = per.get(name, 0) + ns - a.get(tid, (name, 0))[1]
    total = sum(per.values())
    print(f"| thread (over {wall:.0f} s) | CPU ms per second |\n|---|---|")
    for name, ns in sorted(per.items(), key=lambda kv: -kv[1]):
        print(f"| {name} | {ns / 1e6 / wall:.3f} |")
    print(f"| **all** | **{total / 1e6 / wall:.3f}** ({total / 1e9 / wall * 100:.3f} % of a core) |")


if __name__ == "__main__":
    main()

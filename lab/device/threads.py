"""Where a running process spends its CPU, thread by thread, over a window.

Usage: threads.py <pid> [seconds]
Prints one markdown table: per thread name, ms of CPU per second (from schedstat, in ns)."""
import os
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "scripts", "bench"))
from probe import threads  # noqa: E402  (scripts/bench/probe.py: per-thread schedstat)


def snapshot(pid):
    """CPU seconds per thread name (threads of one name, e.g. tokio workers, summed)."""
    out = {}
    for name, seconds in threads(pid):
        out[name] = out.get(name, 0.0) + seconds
    return out


def main():
    pid = int(sys.argv[1])
    seconds = float(sys.argv[2]) if len(sys.argv) > 2 else 60
    a, t0 = snapshot(pid), time.time()
    time.sleep(seconds)
    b, wall = snapshot(pid), time.time() - t0
    per = {name: seconds - a.get(name, 0.0) for name, seconds in b.items()}
    total = sum(per.values())
    print(f"| thread (over {wall:.0f} s) | CPU ms per second |\n|---|---|")
    for name, seconds in sorted(per.items(), key=lambda kv: -kv[1]):
        print(f"| {name} | {seconds * 1e3 / wall:.3f} |")
    print(f"| **all** | **{total * 1e3 / wall:.3f}** ({total / wall * 100:.3f} % of a core) |")


if __name__ == "__main__":
    main()

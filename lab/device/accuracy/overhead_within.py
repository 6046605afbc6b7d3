"""The probe's launch cost inside one process, so that the drift between processes (a third of
the loop's speed, docs/validation.md) drops out. The probe attaches CUPTI only after
TESSERA_PROBE_START_MS and notes each toggle of kernel records in TESSERA_PROBE_TRACE_LOG
(CUPTI's clock, which is CLOCK_REALTIME: time.time_ns() here). The loop launches tiny kernels
in blocks of 100 and files each block as before the attach, traced, untraced, or holding a
toggle. A run without the probe (no log) is the control for drift within a process.
PIN_MAIN=cpu pins the launching thread. Prints one JSON line.  usage: overhead_within.py NAME SECONDS [TRACE_LOG]"""
import json, os, statistics, sys, time
import torch

name, seconds = sys.argv[1], float(sys.argv[2])
log_path = sys.argv[3] if len(sys.argv) > 3 else None
start_ms = float(os.environ.get("TESSERA_PROBE_START_MS", "0") or 0)


def thread_cpu():
    """CPU seconds per thread name (utime + stime)."""
    out = {}
    tick = os.sysconf("SC_CLK_TCK")
    for tid in os.listdir("/proc/self/task"):
        try:
            comm = open(f"/proc/self/task/{tid}/comm").read().strip()
            fields = open(f"/proc/self/task/{tid}/stat").read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        out[comm] = out.get(comm, 0.0) + (int(fields[11]) + int(fields[12])) / tick
    return out


x = torch.randn(1024, device="cuda")
# PIN_MAIN=cpu: the launching thread alone on one CPU, set after cuInit so that the probe's
# and CUPTI's threads (started from it later) are not pinned with it.
if os.environ.get("PIN_MAIN"):
    os.sched_setaffinity(0, {int(os.environ["PIN_MAIN"])})
t = time.perf_counter()
while time.perf_counter() - t < 1.0:
    for _ in range(1000):
        x.mul_(1.0)
torch.cuda.synchronize()

blocks = []  # (wall start ns, wall end ns, perf ns)
cpu_at = {}
end = time.time_ns() + int(seconds * 1e9)
while True:
    w0 = time.time_ns()
    if w0 >= end:
        break
    p0 = time.perf_counter_ns()
    for _ in range(100):
        x.mul_(1.0)
    p1 = time.perf_counter_ns()
    blocks.append((w0, time.time_ns(), p1 - p0))
    if len(blocks) % 2000 == 0:
        cpu_at[w0] = thread_cpu()
torch.cuda.synchronize()
cpu_end = thread_cpu()

events = []
if log_path and os.path.exists(log_path):
    for line in open(log_path):
        parts = line.split()
        if len(parts) == 3:
            events.append((int(parts[1]), parts[0], int(parts[2])))
events.sort()
attach = next((ns for ns, what, _ in events if what == "attach"), None)


def state_at(ns):
    """'before', 'on' or 'off' at `ns`."""
    state = "before"
    for at, what, _ in events:
        if at > ns:
            break
        state = "off" if what == "off" else "on"
    return state


classes = {"before": [], "on": [], "off": [], "toggle": [], "control-early": [], "control-late": []}
for w0, w1, dt in blocks:
    per = dt / 100 / 1000  # µs per launch
    if not events:
        split = blocks[0][0] + (start_ms or seconds * 500) * 1e6
        classes["control-early" if w1 < split else "control-late"].append(per)
        continue
    s0, s1 = state_at(w0), state_at(w1)
    classes[s0 if s0 == s1 else "toggle"].append(per)

# What the process paid: mean µs per launch (stalls included) before and after the attach.
def rate(sel):
    n = sum(100 for b in blocks if sel(b))
    t = sum(b[2] for b in blocks if sel(b))
    return t / n / 1000 if n else None

row = {"name": name, "blocks": len(blocks)}
for k, v in classes.items():
    if v:
        row[k] = {"n": len(v), "median_us": round(statistics.median(v), 3),
                  "mean_us": round(statistics.fmean(v), 3)}
if attach:
    settle = attach + 3_000_000_000  # the governor judges once a second
    row["mean_before_us"] = rate(lambda b: b[1] < attach)
    row["mean_after_us"] = rate(lambda b: b[0] > settle)
    toggles = [(what, took) for _, what, took in events if what in ("on", "off")]
    row["toggles"] = len(toggles)
    row["toggle_call_us"] = {w: round(statistics.median([t for x, t in toggles if x == w]) / 1000, 1)
                             for w in ("on", "off") if any(x == w for x, _ in toggles)}
    on_ns, state, since, stop = 0, "on", settle, blocks[-1][1]
    for ns, what, _ in events:
        ns = min(max(ns, settle), stop)
        if state == "on":
            on_ns += ns - since
        state, since = ("off" if what == "off" else "on"), ns
    if state == "on":
        on_ns += stop - since
    row["traced_share_after"] = round(on_ns / max(1, stop - settle), 3)
# Threads that took CPU while the probe was attached (or over the second half, control).
mark = min((w for w in cpu_at if w > (attach or blocks[len(blocks) // 2][0])), default=None)
if mark:
    base = cpu_at[mark]
    span = (blocks[-1][1] - mark) / 1e9
    row["thread_cpu_share"] = {k: round((v - base.get(k, 0.0)) / span, 3)
                               for k, v in cpu_end.items() if v - base.get(k, 0.0) > 0.005 * span}
print(json.dumps(row), flush=True)
# BLOCKS_OUT=file: every block (wall start ns, µs per launch, state) for a look at the series.
if os.environ.get("BLOCKS_OUT"):
    import gzip
    with gzip.open(os.environ["BLOCKS_OUT"], "wt") as f:
        for w0, w1, dt in blocks:
            f.write(f"{w0} {dt / 100 / 1000:.3f} {state_at(w0) if events else '-'}\n")

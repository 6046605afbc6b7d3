"""One suite tenant (suite.py run) under PyTorch's profiler, its kernel records dumped in the
probe's record-log format (crates/probe/src/record_log.rs) for solo_replay.py and
toggle_replay.py (issue 21, run 4). Used where the probe's own dump could not be carried to the
device machine: the profiler's CUDA records come from CUPTI, as the probe's do.
  kineto_tenant.py OUT F KIND UTIL START DUR TRUTH.json CALIB.json
F < 1: a thread turns CUPTI's kernel records off and on in 20 ms slots, on in a fraction F of
them (the same slots in every process: a seeded draw per slot of the wall clock), as the
probe's duty cycles do; each toggle is logged as `R <1 on|0 off> <cupti ns before> <cupti ns
after> <unix ns>`. `B <ns>` is the profiler's base time: a record's unix time is its time plus
B. Shape lines carry no name (`S id gx gy gz bx by bz shared`) in the toggle runs."""
import ctypes as C, json, os, random, runpy, sys, threading, time
from torch.profiler import profile, ProfilerActivity as A

# suite.py is maintained harness (lab/device/accuracy/); beside this file when both folders
# were carried as one.
HERE = os.path.dirname(os.path.abspath(__file__))
SUITE = next(p for p in (os.path.join(HERE, "suite.py"),
                         os.path.join(HERE, "..", "..", "accuracy", "suite.py")) if os.path.exists(p))
o, F = sys.argv[1], float(sys.argv[2])
sys.argv = ["suite.py", "run"] + sys.argv[3:]
L, M = [], 20_000_000


def toggle():
    cu = C.CDLL([l.split()[-1] for l in open("/proc/self/maps") if "libcupti" in l][0])
    on, t = 1, C.c_uint64()
    g = lambda: cu.cuptiGetTimestamp(C.byref(t)) or t.value
    while True:
        n = time.time_ns()
        s = n // M
        w = random.Random(s).random() < F
        if w != on:
            a = g()
            (cu.cuptiActivityEnable if w else cu.cuptiActivityDisable)(10)
            L.append((w, a, g(), n))
            on = w
        time.sleep(max(0, ((s + 1) * M - time.time_ns()) / 1e9))


with profile(activities=[A.CUDA]) as p:
    if F < 1:
        threading.Thread(target=toggle, daemon=True).start()
    runpy.run_path(SUITE, run_name="__main__")
p.export_chrome_trace(o + ".j")
d = json.load(open(o + ".j"))
os.remove(o + ".j")
b = int(d.get("baseTimeNanoseconds", 0))
f = open(o, "w")
f.write("B %d\n" % b)
for x in L:
    f.write("R %d %d %d %d\n" % x)
S, ps, pc = {}, 0, 0
for e in d["traceEvents"]:
    if e.get("cat") != "kernel":
        continue
    a = e["args"]
    k = (e["name"], tuple(a.get("grid", [0] * 3)), tuple(a.get("block", [0] * 3)), a.get("shared memory", 0))
    if k not in S:
        S[k] = len(S)
        f.write("S %d %s %s %d\n" % (S[k], " ".join(map(str, k[1])), " ".join(map(str, k[2])), k[3]))
    t = e["ts"]
    s = round(t * 1000) + (b if t < 1e12 else 0)
    c = a.get("correlation", 0)
    f.write("K %d %d %d 0 %d\n" % (S[k], s - ps, round(e["dur"] * 1000), c - pc))
    ps, pc = s, c

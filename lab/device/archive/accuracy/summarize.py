"""One JSON line for a case: each worker's truth next to raw NVML (pmon, v1 API), tessera's
default (published share or withheld, idle verdict) and tessera with the CUDA probe."""
import json, sys, subprocess, glob, os
n = sys.argv[1]
here = os.path.dirname(os.path.abspath(__file__))
procs = [json.load(open(f)) for f in sorted(glob.glob(f"/tmp/{n}-[0-9].json"))]
w = json.load(open(f"/tmp/{n}-watch.json"))
d = json.load(open(f"/tmp/{n}-default.json"))
p = json.load(open(f"/tmp/{n}-probe.json"))
pm = json.loads(subprocess.run(["python3", os.path.join(here, "pmon_avg.py"), f"/tmp/{n}-pmon.txt"],
                               capture_output=True, text=True).stdout or "{}")
rows = []
for q in procs:
    pid = str(q["pid"])
    rows.append({"pid": pid, "kind": q["kind"], "duty": q["duty_asked"], "truth": round(q["truth"], 3),
                 "burst_events": round(q["burst_events"], 3) if q.get("burst_events") is not None else None,
                 "pmon": round(pm[pid] / 100, 3) if pid in pm else None,
                 "nvml_v1_1s": w["v1_1s"]["avg"].get(pid),
                 "default_share": d["share"].get(pid), "default_share_reads": d["share_present"].get(pid, 0),
                 "default_idle": d["idle_fraction"].get(pid),
                 "probe_share": p["busy"].get(pid) if p["busy"].get(pid) is not None else p["share"].get(pid),
                 "probe_idle": p["idle_fraction"].get(pid),
                 # Kernels the probe counted per op the worker ran (a matmul is one kernel):
                 # below 1, records were lost or never made.
                 "probe_kernels_per_op": round(p.get("kernels_per_s", {})[pid] / (q["ops"] / q["wall_s"]), 3)
                     if p.get("kernels_per_s", {}).get(pid) and q.get("ops") else None})
print(json.dumps({"case": n, "sum_truth": round(sum(q["truth"] for q in procs), 3),
                  "device_util": w.get("device_util_0.1s"), "default_reads": d["reads"],
                  "default_unattributed": d["unattributed"], "default_methods": d["methods"],
                  "probe_methods": p["methods"], "probe_whys": p.get("whys"), "procs": rows}))

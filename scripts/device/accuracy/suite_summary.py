"""One JSON line for a suite case: per tenant its truth, the default instance's share and
idle verdict, the probe instance's share and idle verdict, and the probe split's stages
(tessera's /debug/attribution probe_stages, averaged over the reads)."""
import json, sys, glob
n, failed = sys.argv[1], int(sys.argv[2])
procs = [json.load(open(f)) for f in sorted(glob.glob(f"/tmp/{n}-[0-9].json"))]
w = json.load(open(f"/tmp/{n}-watch.json"))
d = json.load(open(f"/tmp/{n}-default.json"))
p = json.load(open(f"/tmp/{n}-probe.json"))
r3 = lambda v: round(v, 4) if isinstance(v, float) else v
rows = []
for q in procs:
    pid = str(q["pid"])
    share = p["busy"].get(pid) if p["busy"].get(pid) is not None else p["share"].get(pid)
    rows.append({"pid": pid, "kind": q["kind"], "util": q.get("util"), "truth": r3(q["truth"]),
                 "served": q.get("served"), "late_s": r3(q.get("late_s")),
                 "default_share": d["share"].get(pid), "default_reads": d["share_present"].get(pid, 0),
                 "default_idle": d["idle_fraction"].get(pid),
                 "probe_share": share, "probe_reads": p["share_present"].get(pid, 0),
                 "probe_idle": p["idle_fraction"].get(pid),
                 "stages": p.get("stages", {}).get(pid)})
print(json.dumps({"case": n, "workloads_failed": failed, "sum_truth": r3(sum(q["truth"] for q in procs)),
                  "device_util_0.1s": w.get("device_util_0.1s"), "device_tessera": p.get("device"),
                  "probe_scale": p.get("scale"), "probe_reads": p["reads"],
                  "default_methods": d["methods"], "probe_methods": p["methods"],
                  "probe_whys": p.get("whys"), "procs": rows}))

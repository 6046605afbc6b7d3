"""One JSON line for a suite case: per tenant its truth, the default instance's share and
idle verdict, the probe instance's share and idle verdict, and the probe split's stages
(tessera's /debug/attribution probe_stages, averaged over the reads); per case the device's
NVML utilization and GPM SM activity as the instances published them. When suite.sh ran a
second default instance from an earlier build (BASELINE), its idle verdicts too."""
import json, os, sys, glob
n, failed = sys.argv[1], int(sys.argv[2])
procs = [json.load(open(f)) for f in sorted(glob.glob(f"/tmp/{n}-[0-9].json"))]
w = json.load(open(f"/tmp/{n}-watch.json"))
d = json.load(open(f"/tmp/{n}-default.json"))
p = json.load(open(f"/tmp/{n}-probe.json"))
b = json.load(open(f"/tmp/{n}-baseline.json")) if os.path.exists(f"/tmp/{n}-baseline.json") else None
r3 = lambda v: round(v, 4) if isinstance(v, float) else v


def gauge(inst, key):
    """A device gauge of the GPU the tenants ran on (CUDA's device 0: NVML index 0, or the
    only GPU listed)."""
    g = (inst or {}).get("device_gauges") or {}
    one = g.get("0") or (next(iter(g.values())) if len(g) == 1 else {})
    return one.get(key)


rows = []
for q in procs:
    pid = str(q["pid"])
    share = p["busy"].get(pid) if p["busy"].get(pid) is not None else p["share"].get(pid)
    rows.append({"pid": pid, "kind": q["kind"], "util": q.get("util"), "truth": r3(q["truth"]),
                 "served": q.get("served"), "late_s": r3(q.get("late_s")),
                 "default_share": d["share"].get(pid), "default_reads": d["share_present"].get(pid, 0),
                 "default_idle": d["idle_fraction"].get(pid),
                 "default_idle_reads": d.get("idle_reads", {}).get(pid),
                 "default_verdicts": d.get("verdict_reads", {}).get(pid),
                 "baseline_idle": b["idle_fraction"].get(pid) if b else None,
                 "baseline_idle_reads": b.get("idle_reads", {}).get(pid) if b else None,
                 "probe_share": share, "probe_reads": p["share_present"].get(pid, 0),
                 "probe_idle": p["idle_fraction"].get(pid),
                 "stages": p.get("stages", {}).get(pid)})
gpm = gauge(d, "gpm_sm_activity")
print(json.dumps({"case": n, "workloads_failed": failed, "sum_truth": r3(sum(q["truth"] for q in procs)),
                  "device_util_0.1s": w.get("device_util_0.1s"), "device_tessera": p.get("device"),
                  "device_nvml_default": gauge(d, "nvml_util"),
                  "device_gpm": gpm if gpm is not None else gauge(p, "gpm_sm_activity"),
                  "probe_scale": p.get("scale"), "probe_reads": p["reads"], "default_reads": d["reads"],
                  "baseline_reads": b["reads"] if b else None,
                  "default_methods": d["methods"], "probe_methods": p["methods"],
                  "baseline_methods": b["methods"] if b else None,
                  "probe_whys": p.get("whys"), "probe_disputes": p.get("disputes"), "procs": rows}))

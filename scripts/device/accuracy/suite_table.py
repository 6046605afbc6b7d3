"""Markdown tables from suite.sh's JSON lines: per tenant, truth against each instance, the
idle verdicts, and the probe split's stages.  suite_table.py SUITE.jsonl"""
import json, sys
f = lambda v: "—" if v is None else f"{v:.3f}"
print("| case | tenant | truth | default | default idle | probe | probe − truth (points) | probe idle |"
      " spans | timeline covered | solo | contended | own (solo rule) | own (now) |")
print("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
for line in open(sys.argv[1]):
    if not line.startswith("{"): continue
    c = json.loads(line)
    for i, p in enumerate(c["procs"]):
        st = p.get("stages") or {}
        d = None if p["probe_share"] is None else (p["probe_share"] - p["truth"]) * 100
        name = f'{c["case"]} (device {f(c["device_tessera"])}, cap {f(c["probe_scale"])})' if i == 0 else ""
        print(f'| {name} | {p["kind"]} {p["util"] or ""} | {f(p["truth"])} | {f(p["default_share"])} | '
              f'{p["default_idle"]} | {f(p["probe_share"])} | {"—" if d is None else f"{d:+.1f}"} | {p["probe_idle"]} | '
              + " | ".join(f(st.get(k)) for k in ["spans", "timeline_covered", "timeline_solo", "contended", "own_by_solo", "own"]) + " |")

"""Polls one tessera every 0.2 s while a second tenant B starts beside a tenant A, and notes
when tessera first publishes both tenants' shares from the probes' timelines.
usage: watch_pair.py BASE_URL PID_A PID_B B_FIRST_FILE SECONDS OUT.json
B_FIRST_FILE holds the wall time of B's first kernel (tenant.py writes it)."""
import json, re, sys, time, urllib.request
base, a, b, first_file, secs, out = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4], float(sys.argv[5]), sys.argv[6]
reads, t_end = [], time.time() + secs
while time.time() < t_end:
    t = time.time()
    try:
        body = urllib.request.urlopen(base + "/metrics", timeout=2).read().decode()
        dbg = json.loads(urllib.request.urlopen(base + "/debug/attribution", timeout=2).read())
    except Exception:
        time.sleep(0.2); continue
    share = {}
    for m in re.finditer(r'gpu_process_sm_utilization_ratio\{([^}]*)\} (\S+)', body):
        p = re.search(r'pid="(\d+)"', m.group(1))
        if p and p.group(1) in (a, b): share[p.group(1)] = float(m.group(2))
    c = (dbg.get("gpus") or [{}])[0].get("compute", {})
    reads.append({"t": round(t, 3), "share": share, "method": c.get("method"),
                  "candidates": [str(x) for x in c.get("candidates", [])], "why": c.get("why", "")[:90]})
    time.sleep(max(0, 0.2 - (time.time() - t)))
try: b_first = float(open(first_file).read())
except Exception: b_first = None
seen = next((r["t"] for r in reads if b in r["candidates"]), None)
both = next((r["t"] for r in reads if r["method"] == "probe" and a in r["share"] and b in r["share"]), None)
timelines = next((r["t"] for r in reads if r["why"].startswith("CUDA probe timelines")
                  and a in r["share"] and b in r["share"]), None)
rel = lambda x: round(x - b_first, 2) if x is not None and b_first else None
res = {"b_first_kernel": b_first, "b_candidate_after_s": rel(seen), "both_shares_after_s": rel(both),
       "timelines_after_s": rel(timelines),
       "reads": len(reads)}
if both is not None:
    r = next(r for r in reads if r["t"] == both); res["first_both"] = r
print(json.dumps(res), flush=True)
json.dump({**res, "series": reads}, open(out, "w"))

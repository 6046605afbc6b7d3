"""The energy validation's tables, from driver.py's energy.jsonl (docs/energy-validation.md).

    analyze.py energy.jsonl

1. Each phase: the GPU's energy over the measured window (its own counter), its mean power,
   the power above the idle floor, and tessera's split of the same window: each container's
   energy by activity, its dynamic part, and what went to nobody, by reason.
2. The checks:
   - exclusive (a-alone): a's energy over tessera's own device energy, target 100 % ± 1 %;
   - idle holder (b-alone): a's energy is all `idle` and about half the floor; none of B's work;
   - conservation: containers + nobody against the device, every window, target ± 1 %;
   - the split of the work (together-ts, together-mps): each tenant's part of the dynamic
     energy tessera charged, against its part of the alone runs' energy above the floor
     (same work per second alone and shared), target within 15 % relative.
"""
import json
import sys


def load(path):
    header, phases, footer = None, {}, None
    with open(path) as f:
        for line in f:
            r = json.loads(line)
            if r.get("header"):
                header = r
            elif r.get("footer"):
                footer = r
            else:
                phases[r["phase"]] = r
    return header, phases, footer


def delta(r, key, sub=None):
    """Increase of a tessera family (a dict entry, or a value) over the window."""
    a, b = r["start"]["tessera"], r["end"]["tessera"]
    if sub is None:
        return (b[key] or 0.0) - (a[key] or 0.0)
    return b[key].get(sub, 0.0) - a[key].get(sub, 0.0)


def window(r):
    return r["end"]["t"] - r["start"]["t"]


def nvml_j(r):
    return r["end"]["nvml_j"] - r["start"]["nvml_j"]


def pct(x):
    return "n/a" if x is None else f"{100 * x:.1f} %"


def main():
    header, phases, footer = load(sys.argv[1])
    if header is None:
        print("no header in the data: the driver failed before it started (see driver.log)")
        print(f"failures: {(footer or {}).get('failures')}")
        print("energy: 0 passed, 1 failed")
        return
    print(f"# energy validation: {header.get('model')} (GPU {header.get('gpu')}), commit "
          f"{header.get('commit')}, cgroups {header.get('cgroups')}"
          f"{', DRY RUN: figures mean nothing' if header.get('dry') else ''}")
    print(f"tenants (bf16 matmul edge, share of each 100 ms alone): {header.get('tenants')}")
    idle = phases.get("idle")
    floor = nvml_j(idle) / window(idle) if idle else None
    tfloor = idle["end"]["tessera"].get("floor_w") if idle else None
    print(f"idle floor: {floor:.1f} W from the GPU's counter over the idle window; tessera learned "
          f"{tfloor if tfloor is None else f'{tfloor:.1f} W'}" if floor else "idle floor: not measured")
    print()
    print("| phase | s | GPU J (NVML) | mean W | above floor W | tessera device J | a J by activity | "
          "b J by activity | a dynamic J | b dynamic J | nobody J by reason | conservation |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|")
    checks = []
    above = {}
    for name, r in phases.items():
        t = window(r)
        e = nvml_j(r)
        dev = delta(r, "device_j")
        per = {}
        for pod in ("a", "b"):
            per[pod] = {act: delta(r, "containers", f"{pod}/{act}") for act in ("idle", "not-idle")}
        nobody = {k: delta(r, "nobody", k) for k in r["end"]["tessera"]["nobody"]}
        charged = sum(sum(v.values()) for v in per.values()) + sum(nobody.values())
        cons = charged / dev if dev else None
        above[name] = (e / t - floor) if floor is not None and t > 0 else None
        fmt = lambda d: ", ".join(f"{k} {v:.0f}" for k, v in d.items() if abs(v) > 0.5) or "0"
        print(f"| {name} | {t:.1f} | {e:.0f} | {e / t:.1f} | "
              f"{'n/a' if above[name] is None else f'{above[name]:.1f}'} | {dev:.0f} | {fmt(per['a'])} | "
              f"{fmt(per['b'])} | {delta(r, 'dynamic', 'a'):.0f} | {delta(r, 'dynamic', 'b'):.0f} | "
              f"{fmt(nobody)} | {pct(cons)} |")
        if cons is not None:
            checks.append((f"conservation {name}", abs(cons - 1) <= 0.01, pct(cons), "100 % ± 1 %"))
    print()
    r = phases.get("a-alone")
    if r:
        dev = delta(r, "device_j")
        a = sum(delta(r, "containers", f"a/{x}") for x in ("idle", "not-idle"))
        share = a / dev if dev else None
        checks.append(("exclusive: a's part of the GPU's energy (a-alone)",
                       share is not None and abs(share - 1) <= 0.01, pct(share), "100 % ± 1 %"))
    r = phases.get("b-alone")
    if r and floor is not None:
        a_idle = delta(r, "containers", "a/idle")
        a_other = delta(r, "containers", "a/not-idle")
        half = floor / 2 * window(r)
        ratio = a_idle / half if half else None
        checks.append(("idle holder a pays half the floor (b-alone)",
                       ratio is not None and abs(ratio - 1) <= 0.1 and a_other < 1.0,
                       f"{pct(ratio)} of half the floor, {a_other:.1f} J not idle", "≈ 100 %, 0 J busy"))
        b_idle = delta(r, "containers", "b/idle")
        checks.append(("busy tenant b has no idle energy (b-alone)", b_idle < 1.0, f"{b_idle:.1f} J", "0 J"))
    alone = (above.get("a-alone"), above.get("b-alone"))
    print("| run | a's part of the dynamic energy (tessera) | alone | relative error | "
          "b's part (tessera) | alone | relative error | dynamic charged / above the floor |")
    print("|---|---|---|---|---|---|---|---|")
    for run in ("together-ts", "together-mps"):
        r = phases.get(run)
        if not r or None in alone or floor is None:
            continue
        da, db = delta(r, "dynamic", "a"), delta(r, "dynamic", "b")
        pa = alone[0] / (alone[0] + alone[1])
        pb = 1 - pa
        total = da + db
        qa = da / total if total > 0 else None
        qb = db / total if total > 0 else None
        ea = abs(qa - pa) / pa if qa is not None else None
        eb = abs(qb - pb) / pb if qb is not None else None
        coverage = total / (nvml_j(r) - floor * window(r)) if nvml_j(r) > floor * window(r) else None
        print(f"| {run} | {pct(qa)} | {pct(pa)} | {pct(ea)} | {pct(qb)} | {pct(pb)} | {pct(eb)} | "
              f"{pct(coverage)} |")
        ok = ea is not None and ea <= 0.15 and eb <= 0.15
        checks.append((f"split of the work, {run}", ok, f"a {pct(ea)}, b {pct(eb)}", "≤ 15 % relative"))
    print()
    for name, ok, got, target in checks:
        print(f"{'ok  ' if ok else 'FAIL'} {name}: {got} (target {target})")
    for name, r in phases.items():
        for x, rep in (r.get("reports") or {}).items():
            if rep:
                print(f"tenant {x} in {name}: {rep['matmuls']} matmuls in {rep['end'] - rep['start']:.1f} s "
                      f"({rep['per_period']} per 100 ms, {rep['overruns']} overruns)")
        why = r["end"]["tessera"].get("why")
        print(f"tessera at the end of {name}: {r['end']['tessera'].get('methods')} "
              f"{r['end']['tessera'].get('sharing_mode')}; {why}")
    if footer and footer.get("failures"):
        print("failures:", footer["failures"])
    print(f"energy: {sum(1 for c in checks if c[1])} passed, {sum(1 for c in checks if not c[1])} failed")


if __name__ == "__main__":
    main()

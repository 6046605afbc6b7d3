#!/usr/bin/env python3
"""The compat surface over the demo's whole scenario loop, through a real Prometheus.

Run by scripts/test-dcgm-compat.sh against a Prometheus that scrapes (honor_labels: true) a demo
whose clock runs ten times faster (TESSERA_DEMO_TIME_SCALE=0.1: a 12 s loop). Checks:

- in every scrape, on every GPU and MIG instance, each additive compat field's series add up to
  tessera's own device figure, and never to more (on a MIG GPU, memory's sum by UUID alone, the
  row outside every instance included, to the GPU's);
- OpenCost's per-container average (its avg_over_time over 5 minutes) for the pods of the
  time-sliced GPU 4 and the MPS GPU 5, against the scenario's own shares in the phases the
  scrapes saw: absent or within the tolerance, never 0 for a pod that was busy;
- a pod's compat compute series, once there, is there in every scrape (its presence does not
  follow its value).

Prints ok/FAIL/note lines and "check_loop: N passed, M failed".
"""

import argparse
import sys
from pathlib import Path

import yaml

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "prometheus"))
from check_consumers import MIB, PARTS_OF_THE_GPU, Prom, fill  # noqa: E402
from checker import Checker  # noqa: E402

# Additive compat fields and how tessera's own device families give their device value.
WHOLE = {
    "DCGM_FI_PROF_GR_ENGINE_ACTIVE": ("gpu_utilization_ratio", 1.0),
    "DCGM_FI_DEV_GPU_UTIL": ("gpu_utilization_ratio", 100.0),
    "DCGM_FI_PROF_SM_ACTIVE": ("gpu_sm_activity_ratio", 1.0),
    "DCGM_FI_DEV_FB_USED": ("gpu_memory_used_bytes", 1 / MIB),
}
MIG = {
    "DCGM_FI_PROF_GR_ENGINE_ACTIVE": ("gpu_mig_instance_sm_activity_ratio", 1.0),
    "DCGM_FI_PROF_SM_ACTIVE": ("gpu_mig_instance_sm_activity_ratio", 1.0),
    "DCGM_FI_DEV_FB_USED": ("gpu_mig_instance_memory_used_bytes", 1 / MIB),
}


def matrix(prom, expr):
    """Raw samples of a range selector: [(labels, {timestamp_ms: value})]."""
    data = prom.get("/api/v1/query", query=expr, time=f"{prom.at:.3f}")
    return [
        (r["metric"], {round(float(t) * 1000): float(v) for t, v in r["values"]})
        for r in data["result"]
    ]


def scenario_shares(path, pids):
    """Per phase, the sum of `pids`' sm_util (0..1) in the demo scenario."""
    doc = yaml.safe_load(Path(path).read_text())
    out = []
    for phase in doc["phases"]:
        out.append(
            sum(p.get("sm_util", 0) for p in phase.get("processes", []) if p.get("pid") in pids) / 100.0
        )
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--prom", required=True)
    ap.add_argument("--queries", required=True)
    ap.add_argument("--scenario", required=True)
    ap.add_argument("--job", required=True)
    args = ap.parse_args()

    c = Checker()
    prom = Prom(args.prom)
    spec = yaml.safe_load(Path(args.queries).read_text())
    loop, job = spec["loop"], args.job
    window = loop["window"]
    last = prom.query(f'timestamp(up{{job="{job}"}})')
    if not last:
        c.fail(f"no scrape of job {job}")
        print(f"check_loop: {c.passed} passed, {c.failed} failed")
        return 1
    prom.at = last[0][1]

    # --- which phase each scrape saw ----------------------------------------------------------
    util = matrix(prom, f'gpu_utilization_ratio{{job="{job}",gpu="{loop["phase_gpu"]}"}}[{window}]')
    marks = loop["phase_utilization"]
    phase_at = {}
    for _, samples in util:
        for t, v in samples.items():
            i = min(range(len(marks)), key=lambda k: abs(marks[k] - v))
            if abs(marks[i] - v) < 0.005:
                phase_at[t] = i
    phases_seen = sorted(set(phase_at.values()))
    loops = len(phase_at) / 12.0
    c.check(
        phases_seen == list(range(len(marks))) and loops >= 2,
        f"the scrapes cover the whole loop: phases {phases_seen} over {len(phase_at)} scrapes "
        f"(~{loops:.1f} loops of 12 s)",
    )

    # --- the sums, in every scrape -------------------------------------------------------------
    snapshots, above, off = set(), [], []
    free = {}  # (timestamp, UUID, GPU_I_ID) -> free MiB, from tessera's own memory families
    for prefix, mig in (("gpu_memory", False), ("gpu_mig_instance_memory", True)):
        parts = {}
        for part in ("total", "used", "reserved"):
            for m, samples in matrix(prom, f'{prefix}_{part}_bytes{{job="{job}"}}[{window}]'):
                gi = m.get("gpu_instance_id", "") if mig else ""
                for t, v in samples.items():
                    parts.setdefault((t, m["uuid"], gi), {})[part] = v
        for k, p in parts.items():
            if "total" in p and "used" in p:
                free[k] = max(p["total"] - p["used"] - p.get("reserved", 0.0), 0.0) / MIB
    fields = sorted(set(WHOLE) | set(MIG) | {"DCGM_FI_DEV_FB_FREE"})
    for field in fields:
        device = dict(free) if field == "DCGM_FI_DEV_FB_FREE" else {}
        for table, mig in ((WHOLE, False), (MIG, True)):
            if field not in table:
                continue
            family, factor = table[field]
            for m, samples in matrix(prom, f'{family}{{job="{job}"}}[{window}]'):
                gi = m.get("gpu_instance_id", "") if mig else ""
                for t, v in samples.items():
                    device[(t, m["uuid"], gi)] = v * factor
        sums = {}
        for m, samples in matrix(prom, f'{field}{{job="{job}"}}[{window}]'):
            for t, v in samples.items():
                k = (t, m["UUID"], m.get("GPU_I_ID", ""))
                sums[k] = sums.get(k, 0.0) + v
                if v < 0:
                    above.append(f"{field} {k}: a series reads {v}")
        if field in PARTS_OF_THE_GPU:
            # On a MIG GPU the row without GPU_I_ID is memory outside every instance: the GPU's
            # figure is the sum by UUID alone, instances included.
            by_gpu = {}
            for (t, uuid, gi), v in sums.items():
                by_gpu[(t, uuid)] = by_gpu.get((t, uuid), 0.0) + v
            for t, uuid, gi in list(sums):
                if gi:
                    sums[(t, uuid, "")] = by_gpu[(t, uuid)]
        for k, s in sums.items():
            want = device.get(k)
            if want is None:
                continue
            snapshots.add(k[0])
            eps = 1e-6 * max(abs(want), 1.0)
            if s > want + eps:
                above.append(f"{field} {k[1][:12]}… GI {k[2] or '-'} at {k[0]}: {s} > {want}")
            elif abs(s - want) > eps:
                off.append(f"{field} {k[1][:12]}… GI {k[2] or '-'} at {k[0]}: {s} vs {want}")
    c.check(
        snapshots and not above,
        f"in every one of {len(snapshots)} scrapes over the loop, no device's compat tenants add up "
        f"to more than the device ({', '.join(fields)})"
        + (f"; {len(above)} above: {above[:4]}" if above else ""),
    )
    c.check(
        snapshots and not off,
        f"in every scrape each device's compat series add up to tessera's device figure"
        + (f"; {len(off)} off: {off[:4]}" if off else ""),
    )

    # --- OpenCost's average, per pod, against the scenario --------------------------------------
    q = fill(spec["opencost"]["usage_avg"], window=window, cluster="cluster_id", filter="")
    q = q.replace('{container!=""', f'{{job="{job}",container!=""')
    rows = {m.get("pod"): v for m, v in prom.query(q)}
    known = {}  # pod -> timestamps at which tessera knew it held its GPU
    for m, samples in matrix(prom, f'gpu_container_memory_used_bytes{{job="{job}"}}[{window}]'):
        known.setdefault(m["pod"], set()).update(samples)
    for pod, want in loop["pods"].items():
        shares = scenario_shares(args.scenario, set(want["pids"]))
        ts = [t for t in known.get(pod, ()) if t in phase_at]
        truth = sum(shares[phase_at[t]] for t in ts) / len(ts) if ts else None
        got = rows.get(pod)
        if truth is None:
            c.fail(f"OpenCost usage_avg[{window}] {pod}: no scrape to take the truth from")
            continue
        within = got is not None and abs(got - truth) <= loop["tolerance"] * truth
        if want.get("present"):
            ok = within
            what = "present and"
        else:
            ok = got is None or within
            what = "absent or"
        c.check(
            ok,
            f"OpenCost usage_avg[{window}] {pod} (GPU {want['gpu']}): {what} within "
            f"{loop['tolerance']:.0%} of its true average {truth:.4f} over {len(ts)} scrapes: "
            + ("absent" if got is None else f"{got:.4f}"),
        )

    # --- presence does not follow the value -----------------------------------------------------
    flicker = []
    all_ts = sorted(phase_at)
    for m, samples in matrix(prom, f'DCGM_FI_PROF_GR_ENGINE_ACTIVE{{job="{job}",pod!=""}}[{window}]'):
        first = min(samples)
        expected = [t for t in all_ts if t >= first]
        missing = [t for t in expected if t not in samples]
        if missing:
            flicker.append(f"{m['pod']} on GPU {m['gpu']}: missing in {len(missing)} of {len(expected)}")
    c.check(
        not flicker,
        "every pod's compat compute series, once there, is in every later scrape"
        + (f"; not: {flicker[:4]}" if flicker else ""),
    )

    print(f"check_loop: {c.passed} passed, {c.failed} failed")
    return 0 if c.failed == 0 else 1


if __name__ == "__main__":
    sys.exit(main())

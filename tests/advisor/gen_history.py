#!/usr/bin/env python3
"""A week of tessera samples for a small demo-like cluster whose workloads have
known shapes, written as OpenMetrics for `promtool tsdb create-blocks-from
openmetrics`, one file per 2-hour block (promtool re-reads its whole input for
every block it cuts, so one big file would be parsed 84 times).

    gen_history.py OUTDIR --end UNIX_SECONDS [--days 7] [--step 120]

SHAPES below is the contract with check_advice.py: each workload's shape and
what the advisor must say about it. All GPUs are "NVIDIA H100 80GB HBM3".
Deterministic: the same --end gives the same samples.
"""
import argparse
import math
import os
import random

GIB = 1024**3
MODEL = "NVIDIA H100 80GB HBM3"
BLOCK = 2 * 3600

# workload key -> what the advisor must conclude (check_advice.py asserts it).
SHAPES = {
    "research/StatefulSet/notebook": {
        "shape": "holds 30 GiB on a whole GPU, never computes",
        "action": "release", "gpus_saved": 1.0},
    "serving/Deployment/embed": {
        "shape": "3 replicas of light inference, 4-9 % SM (CUDA probe; NVML reads 50 %), 6 GiB",
        "action": "mig", "profile": "1g.10gb", "gpus_saved": 3 - 3 / 7},
    "ml/Job/train": {
        "shape": "2 replicas of steady training, ~90 % SM, 70 GiB",
        "action": "keep", "gpus_saved": 0.0},
    "search/Deployment/rerank": {
        "shape": "2 replicas, bursty: ~12 % SM with bursts to ~45 % a tenth of the time, 20 GiB peak",
        "action": "mps", "clients": 3, "gpus_saved": 2 - 2 / 3},
    "batch/Deployment/etl": {
        "shape": "2 pods time-sliced on one GPU, both running kernels: no per-container compute figure",
        "action": "decline", "reason": "compute", "gpus_saved": 0.0},
    "vision/Deployment/ocr": {
        "shape": "one 3g.40gb MIG instance at ~8 % of its SMs (GPM), 7 GiB",
        "action": "mig", "profile": "1g.10gb", "gpus_saved": 3 / 7 - 1 / 7},
    "dev/Deployment/newbie": {
        "shape": "light, but only the last 12 hours",
        "action": "decline", "reason": "history", "gpus_saved": 0.0},
}


class Series:
    def __init__(self, family, kind, labels, fn, every=1):
        self.family, self.kind, self.labels, self.fn, self.every = family, kind, labels, fn, every


def lab(d):
    return "{" + ",".join(f'{k}="{v}"' for k, v in d.items()) + "}"


def build(end, days, step):
    start = end - days * 86400
    steps = days * 86400 // step
    series = []

    def gpu(node, idx, mode):
        g = {"node": node, "gpu": str(idx), "uuid": f"GPU-{node}-{idx}", "sharing_mode": mode}
        series.append(Series("gpu_info", "gauge", {**g, "model": MODEL}, lambda t: 1, 2))
        series.append(Series("gpu_up", "gauge", g, lambda t: 1, 2))
        return g

    def container(g, ns, kind, wl, pod, alive_from=0, mig_uuid=None, replicas=1,
                  mem=None, sm=None, busy=None, idle=None, unknown=None):
        c = dict(g)
        if mig_uuid:
            c["mig_uuid"] = mig_uuid
        c.update({"namespace": ns, "pod": pod, "container": "main"})
        w = {**c, "workload_kind": kind, "workload": wl}
        if not mig_uuid:
            series.append(Series("gpu_replicas", "gauge", g, lambda t: replicas, 2))
        alive = (lambda t: t >= alive_from)
        series.append(Series("gpu_container_allocation", "gauge",
                             {**w, "resource": "nvidia.com/gpu", "device_id": mig_uuid or g["uuid"]},
                             lambda t: 1 if alive(t) else None, 2))
        series.append(Series("gpu_container_memory_used_bytes", "gauge", w,
                             lambda t: mem(t) if alive(t) else None))
        if sm:
            series.append(Series("gpu_container_sm_utilization_ratio", "gauge", w,
                                 lambda t: sm(t) if alive(t) else None))
        if busy:
            series.append(Series("gpu_container_busy_ratio", "gauge", c,
                                 lambda t: busy(t) if alive(t) else None))
        for fam, frac in (("gpu_container_idle_seconds", idle), ("gpu_container_activity_unknown_seconds", unknown)):
            acc = {"v": 0.0}

            def counter(t, frac=frac, acc=acc):
                if not alive(t):
                    return None
                if frac:
                    acc["v"] += step * frac(t)
                return acc["v"]
            series.append(Series(fam, "counter", w, counter))

    def noise(seed):
        r = random.Random(seed)
        return lambda t: r.random()

    # Steady training: two whole GPUs.
    for i in range(2):
        u = noise(f"train{i}")
        g = gpu("n1", i, "exclusive")
        container(g, "ml", "Job", "train", f"train-{i}", mem=lambda t, u=u: 70 * GIB + u(t) * GIB,
                  sm=lambda t, u=u: 0.86 + 0.1 * u(t), idle=lambda t: 0)
    # The idle holder.
    g = gpu("n1", 2, "exclusive")
    container(g, "research", "StatefulSet", "notebook", "notebook-0", mem=lambda t: 30 * GIB,
              sm=lambda t: 0.0, idle=lambda t: 1)
    # Light inference with a daily cycle. NVML's per-process figure reads 0.5
    # (as under time-slicing, where it books the device's time to one
    # process): the probe's figure must win.
    for i in range(3):
        u = noise(f"embed{i}")
        g = gpu("n1", 3 + i, "exclusive")
        container(g, "serving", "Deployment", "embed", f"embed-6f9c-{i}",
                  mem=lambda t, u=u: 6 * GIB + 0.3 * GIB * u(t),
                  busy=lambda t, u=u: 0.04 + 0.03 * (1 + math.sin(2 * math.pi * t / 86400)) / 2 + 0.015 * u(t),
                  sm=lambda t: 0.5, idle=lambda t: 0)
    # Bursty mid-size: bursts in whole 10-minute blocks, a tenth of them.
    for i in range(2):
        u = noise(f"rerank{i}")

        def rr(t, u=u, i=i):
            burst = random.Random(f"burst{i}-{t // 600}").random() < 0.1
            return (0.42 + 0.06 * u(t)) if burst else (0.09 + 0.05 * u(t))
        g = gpu("n2", i, "exclusive")
        container(g, "search", "Deployment", "rerank", f"rerank-55d-{i}",
                  mem=lambda t, u=u: 18 * GIB + 2 * GIB * u(t), sm=rr, idle=lambda t: 0)
    # Time-sliced by two busy pods: NVML cannot split it, no probe.
    g = gpu("n2", 2, "time-slicing")
    for i in range(2):
        container(g, "batch", "Deployment", "etl", f"etl-7c-{i}", replicas=2,
                  mem=lambda t: 5 * GIB, idle=lambda t: 0, unknown=lambda t: 1)
    # MIG: a 3g.40gb instance held by a small OCR service, a 1g unheld.
    g = gpu("n2", 3, "mig")
    series.append(Series("gpu_mig_slices", "gauge", g, lambda t: 7, 2))
    for mig, gi, prof, sl, act in (("MIG-ocr", "2", "3g.40gb", 3, "ocr"), ("MIG-free", "9", "1g.10gb", 1, None)):
        m = {**g, "sharing_mode": "mig" if act else "unallocated", "mig_uuid": mig,
             "gpu_instance_id": gi, "profile": prof}
        series.append(Series("gpu_mig_instance_info", "gauge", {**m, "compute_instance_id": "0", "slices": str(sl)},
                             lambda t: 1, 2))
        u = noise(mig)
        series.append(Series("gpu_mig_instance_sm_activity_ratio", "gauge", m,
                             (lambda t, u=u: 0.05 + 0.05 * u(t)) if act else (lambda t: 0.0)))
    container({**g, "sharing_mode": "mig"}, "vision", "Deployment", "ocr", "ocr-0", mig_uuid="MIG-ocr",
              mem=lambda t: 7 * GIB, idle=lambda t: 0)
    # A new workload: twelve hours of history.
    g = gpu("n2", 4, "exclusive")
    container(g, "dev", "Deployment", "newbie", "newbie-0", alive_from=end - 12 * 3600,
              mem=lambda t: 4 * GIB, sm=lambda t: 0.05, idle=lambda t: 0)

    times = [start + k * step for k in range(steps + 1)]
    return series, times


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("outdir")
    ap.add_argument("--end", type=int, required=True)
    ap.add_argument("--days", type=int, default=7)
    ap.add_argument("--step", type=int, default=120)
    a = ap.parse_args()
    end = a.end - a.end % a.step
    series, times = build(end, a.days, a.step)
    # Values are computed in time order (counters accumulate), then cut.
    values = []
    for s in series:
        vals = []
        for k, t in enumerate(times):
            v = s.fn(t)
            if v is not None and k % s.every == 0:
                vals.append((t, v))
        values.append(vals)
    os.makedirs(a.outdir, exist_ok=True)
    families = {}
    for s, vals in zip(series, values):
        families.setdefault((s.family, s.kind), []).append((s, vals))
    blocks = sorted({t - t % BLOCK for t in times})
    n = 0
    for b in blocks:
        out = []
        for (fam, kind), members in families.items():
            out.append(f"# TYPE {fam} {kind}\n")
            name = fam + ("_total" if kind == "counter" else "")
            for s, vals in members:
                ls = lab(s.labels)
                out.extend(f"{name}{ls} {v:.6g} {t}\n" for t, v in vals if b <= t < b + BLOCK)
        out.append("# EOF\n")
        with open(os.path.join(a.outdir, f"block-{b}.om"), "w", encoding="utf-8") as f:
            f.write("".join(out))
        n += sum(1 for line in out if not line.startswith("#"))
    print(f"{len(series)} series, {n} samples, {len(blocks)} files, {times[0]}..{times[-1]}")


if __name__ == "__main__":
    main()

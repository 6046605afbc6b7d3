"""Multi-GPU semantics (issue 31): a DDP job over every GPU through NCCL, each rank also leaving
PyTorch's stray context on GPU 0, and a time-sliced matmul tenant on the last GPU.

Checks, from three snapshots taken while everything runs:
  * per-process memory on the right GPU: tessera's gpu_process_memory_used_bytes for every
    (pid, GPU) nvidia-smi --query-compute-apps lists, within 1 %;
  * a rank alone on its GPU keeps NVML's own figure: its gpu_process_sm_utilization_ratio
    against nvidia-smi's utilization.gpu, within 3 points;
  * NVLink: GPM's DCGM_FI_PROF_NVLINK_TX_BYTES per GPU against the bytes the ring all-reduce
    moved (2 (n-1)/n of the buffer per rank per step).

  python3 ddp_check.py --tessera BIN --seconds 45 --out DIR
"""
import argparse
import glob
import json
import os
import subprocess
import sys
import time
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))


def smi(query, kind="gpu"):
    flag = "--query-compute-apps" if kind == "apps" else "--query-gpu"
    out = subprocess.run(["nvidia-smi", f"{flag}={query}", "--format=csv,noheader,nounits"],
                         capture_output=True, text=True).stdout
    return [[c.strip() for c in l.split(",")] for l in out.splitlines() if l.strip()]


def series(text, family):
    out = []
    for line in text.splitlines():
        if not line.startswith(family + "{"):
            continue
        labels, value = line.rsplit(" ", 1)
        body = labels[len(family) + 1:-1]
        d = {}
        for part in body.split('",'):
            if "=" in part:
                k, v = part.split("=", 1)
                d[k.strip()] = v.strip('"')
        out.append((d, float(value)))
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--tessera", required=True)
    ap.add_argument("--seconds", type=float, default=45)
    ap.add_argument("--out", required=True)
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)
    port = 19921
    log = open(os.path.join(args.out, "ddp-tessera.log"), "wb")
    t = subprocess.Popen([args.tessera, f"--web.listen-address=127.0.0.1:{port}", "--kube.enabled=false",
                          "--kubelet.enabled=false", "--metrics.detail=full", "--metrics.dcgm-compat",
                          "--nvml.process-interval=1s", "--sample.interval=1s"], stdout=log, stderr=log)
    time.sleep(3)
    gpus = len(smi("index"))
    result_base = os.path.join(args.out, "ddp-rank")
    env = {**os.environ, "NCCL_NVLS_ENABLE": "0", "TORCH_SYMM_MEM_DISABLE_MULTICAST": "1",
           "NVSHMEM_DISABLE_NVLS": "1"}
    ddp = subprocess.Popen([sys.executable, os.path.join(HERE, "tenant.py"), "ddp", str(args.seconds), result_base],
                           env=env)
    peer = subprocess.Popen([sys.executable, os.path.join(HERE, "tenant.py"), "matmul", str(args.seconds),
                             str(gpus - 1), "0.5"], env=env)
    time.sleep(min(25, args.seconds * 0.5))
    snaps = []
    for _ in range(3):
        apps = smi("pid,gpu_uuid,used_memory", "apps")
        util = smi("index,uuid,utilization.gpu")
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as r:
            metrics = r.read().decode()
        snaps.append({"apps": apps, "util": util, "metrics": metrics, "t": time.time()})
        time.sleep(4)
    ddp.wait()
    peer.wait()
    t.terminate()
    t.wait()
    ranks = []
    for path in sorted(glob.glob(result_base + ".*")):
        with open(path) as f:
            ranks.append(json.load(f))
    rank_pid = {r["pid"]: r["rank"] for r in ranks}
    # Memory, per (pid, GPU).
    mem_rows, mem_ok = [], True
    for s in snaps:
        tess = {(d.get("pid"), d.get("uuid")): v for d, v in series(s["metrics"], "gpu_process_memory_used_bytes")}
        for pid, uuid, used_mib in s["apps"]:
            want = float(used_mib) * 1024 * 1024
            got = tess.get((pid, uuid))
            err = None if got is None else abs(got - want) / max(want, 1.0)
            ok = err is not None and err <= 0.01
            mem_ok &= ok
            mem_rows.append((pid, uuid[-8:], used_mib, None if got is None else round(got / 2**20), err, ok))
    # Lone ranks: the GPU's only process that runs kernels (GPU 0 holds the stray contexts,
    # the last GPU the time-sliced peer).
    lone_rows, lone_ok = [], True
    for s in snaps:
        util = {row[1]: float(row[2]) / 100 for row in s["util"]}
        index_of = {row[1]: int(row[0]) for row in s["util"]}
        procs = series(s["metrics"], "gpu_process_sm_utilization_ratio")
        for d, v in procs:
            pid = int(d.get("pid", "0"))
            gpu = index_of.get(d.get("uuid"), -1)
            if pid in rank_pid and rank_pid[pid] == gpu and 0 < gpu < gpus - 1:
                diff = abs(v - util[d["uuid"]])
                ok = diff <= 0.03
                lone_ok &= ok
                lone_rows.append((rank_pid[pid], gpu, round(v, 3), util[d["uuid"]], round(diff, 3), ok))
    # NVLink, per GPU.
    nv_rows = []
    if ranks:
        n = ranks[0]["world"]
        for r in ranks:
            expect = 2 * (n - 1) / n * r["allreduce_bytes"] * r["steps"] / r["seconds"]
            seen = []
            for s in snaps:
                for d, v in series(s["metrics"], "DCGM_FI_PROF_NVLINK_TX_BYTES"):
                    if d.get("gpu") == str(r["rank"]):
                        seen.append(v)
            got = sum(seen) / len(seen) if seen else None
            nv_rows.append((r["rank"], round(expect / 1e9, 2), None if got is None else round(got / 1e9, 2),
                            None if not got else round(got / expect, 3)))
    sharing = sorted({(d.get("gpu"), d.get("sharing_mode")) for s in snaps for d, _ in series(s["metrics"], "gpu_up")})
    print(f"## DDP over {gpus} GPUs + a time-sliced peer on GPU {gpus - 1}: {len(ranks)} ranks, "
          f"steps {[r['steps'] for r in ranks]}")
    print(f"sharing modes seen: {sharing}")
    print("\n| pid | GPU | nvidia-smi MiB | tessera MiB | error | within 1 % |\n|---|---|---|---|---|---|")
    for row in mem_rows:
        print("| " + " | ".join("-" if c is None else (f"{c:.4f}" if isinstance(c, float) else str(c)) for c in row) + " |")
    print("\n| rank | GPU | tessera process share | NVML device | diff | within 3 points |\n|---|---|---|---|---|---|")
    for row in lone_rows:
        print("| " + " | ".join(str(c) for c in row) + " |")
    print("\n| rank | all-reduce GB/s expected (ring) | GPM NVLink TX GB/s | ratio |\n|---|---|---|---|")
    for row in nv_rows:
        print("| " + " | ".join("-" if c is None else str(c) for c in row) + " |")
    verdict = {"memory_within_1pct": mem_ok and bool(mem_rows), "lone_rank_within_3pts": lone_ok and bool(lone_rows)}
    print(f"\nverdict: {verdict}")
    with open(os.path.join(args.out, "ddp.json"), "w") as f:
        json.dump({"ranks": ranks, "memory": mem_rows, "lone": lone_rows, "nvlink": nv_rows,
                   "sharing": sharing, "verdict": verdict}, f, indent=1)


if __name__ == "__main__":
    main()

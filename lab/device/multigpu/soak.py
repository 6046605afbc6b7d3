"""Multi-GPU soak (issue 31): tessera instances under CUDA process churn on every GPU.

Runs side by side, under the same churn:
  * the fixed build three ways: default flags (NVML in worker processes), --metrics.detail=full
    with --nvml.process-interval=1s, and --nvml.isolation=thread (the GPM gate alone);
  * the unfixed build (BASE) three ways, each respawned when it dies, its deaths counted;
  * the bisect: nvml_hammer groups (one thread per GPU hammering one group of NVML calls) for
    the first HAMMER_SECONDS, each group's death and signal recorded.
Every instance is scraped every second (/metrics and /debug/attribution); the fixed ones'
RSS and open fds (exporter and its NVML workers together) are read every 10 s.
Half of the churn processes load the CUDA probe, reporting to a fixed and an unfixed instance
in turn. Never changes GPU settings.

  python3 soak.py --fixed BIN --base BIN --hammer BIN --probe SO --seconds 600 --out DIR
"""
import argparse
import glob
import json
import os
import random
import signal
import subprocess
import sys
import threading
import time
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))


def gpu_count():
    out = subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True).stdout
    return len([l for l in out.splitlines() if l.startswith("GPU ")])


def get(url, timeout=2.0):
    try:
        with urllib.request.urlopen(url, timeout=timeout) as r:
            return r.status, r.read().decode("utf-8", "replace")
    except Exception as e:  # noqa: BLE001 - a failed scrape is data here
        return None, str(e)


def descendants(pid):
    """pid and every process below it (the NVML workers)."""
    children = {}
    for stat in glob.glob("/proc/[0-9]*/stat"):
        try:
            with open(stat) as f:
                fields = f.read().rsplit(")", 1)[1].split()
            children.setdefault(int(fields[1]), []).append(int(stat.split("/")[2]))
        except (OSError, IndexError, ValueError):
            continue
    out, todo = [], [pid]
    while todo:
        p = todo.pop()
        out.append(p)
        todo.extend(children.get(p, []))
    return out


def footprint(pid):
    """RSS (shared pages counted in every process), PSS (shared pages split) and open fds."""
    rss_kib, pss_kib, fds = 0, 0, 0
    for p in descendants(pid):
        try:
            with open(f"/proc/{p}/status") as f:
                for line in f:
                    if line.startswith("VmRSS:"):
                        rss_kib += int(line.split()[1])
            with open(f"/proc/{p}/smaps_rollup") as f:
                for line in f:
                    if line.startswith("Pss:"):
                        pss_kib += int(line.split()[1])
            fds += len(os.listdir(f"/proc/{p}/fd"))
        except OSError:
            continue
    return rss_kib, pss_kib, fds


def metric_sum(text, family, needle=""):
    total, seen = 0.0, False
    for line in text.splitlines():
        if line.startswith(family + "{") and needle in line:
            try:
                total += float(line.rsplit(" ", 1)[1])
                seen = True
            except ValueError:
                pass
    return total if seen else None


class Instance:
    def __init__(self, name, binary, port, args, out, respawn):
        self.name, self.binary, self.port, self.args = name, binary, port, args
        self.out, self.respawn = out, respawn
        self.proc, self.deaths, self.starts = None, [], 0
        self.scrapes = self.failed_scrapes = self.debug_failed = 0
        self.footprints, self.last_metrics = [], ""
        self.log = open(os.path.join(out, f"{name}.log"), "ab")

    def start(self):
        cmd = [self.binary, f"--web.listen-address=127.0.0.1:{self.port}", "--kube.enabled=false",
               "--kubelet.enabled=false", "--web.enable-debug=true"] + self.args
        # TESSERA_PROBE_SOCKET is tessera's own --probe.socket mirror: keep the churn's out.
        env = {k: v for k, v in os.environ.items() if k != "TESSERA_PROBE_SOCKET"}
        self.proc = subprocess.Popen(cmd, stdout=self.log, stderr=self.log, env=env)
        self.starts += 1

    def check(self, t):
        rc = self.proc.poll()
        if rc is None:
            return
        sig = -rc if rc < 0 else None
        self.deaths.append({"t": round(t, 1), "rc": rc,
                            "signal": signal.Signals(sig).name if sig else None})
        if self.respawn:
            self.start()

    def scrape(self):
        self.scrapes += 1
        status, body = get(f"http://127.0.0.1:{self.port}/metrics")
        if status != 200:
            self.failed_scrapes += 1
        else:
            self.last_metrics = body
        status, _ = get(f"http://127.0.0.1:{self.port}/debug/attribution")
        if status != 200:
            self.debug_failed += 1

    def stop(self):
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()


def churn(args, gpus, until, stats, sockets):
    """One short CUDA process every args.every seconds, round-robin over the GPUs."""
    cupti = [args.cupti] if args.cupti else []
    procs, i, rng = [], 0, random.Random(31)
    while time.time() < until:
        gpu = i % gpus
        env = {**os.environ, "CUDA_VISIBLE_DEVICES": str(gpu)}
        if i % 2 == 0 and args.probe:
            env.update(CUDA_INJECTION64_PATH=args.probe,
                       TESSERA_PROBE_SOCKET=sockets[(i // 2) % len(sockets)])
            if cupti:
                env["TESSERA_PROBE_CUPTI"] = cupti[-1]
            stats["probed"] += 1
        life = rng.uniform(1.0, 4.0)
        procs.append(subprocess.Popen(
            [sys.executable, os.path.join(HERE, "tenant.py"), "churn", str(life)],
            env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
        stats["launched"] += 1
        i += 1
        procs = [p for p in procs if p.poll() is None]
        time.sleep(args.every)
    for p in procs:
        p.wait()


def hammer(args, groups, results):
    ps = []
    for g in groups:
        words = g.split()
        cmd = [args.hammer, words[0], str(args.hammer_seconds), *words[1:]]
        ps.append((g, subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)))
    for g, p in ps:
        out = p.communicate()[0].decode(errors="replace")
        rc = p.returncode
        results.append({"group": g, "rc": rc,
                        "signal": signal.Signals(-rc).name if rc < 0 else None,
                        "out": out.strip().splitlines()[-1:] if out else []})


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--fixed", required=True)
    ap.add_argument("--base")
    ap.add_argument("--hammer")
    ap.add_argument("--probe")
    ap.add_argument("--cupti", help="libcupti.so for the probe (TESSERA_PROBE_CUPTI)")
    ap.add_argument("--seconds", type=float, default=600)
    ap.add_argument("--hammer-seconds", type=int, default=150)
    ap.add_argument("--every", type=float, default=0.9)
    ap.add_argument("--out", required=True)
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)
    gpus = gpu_count()
    sock_fixed, sock_base = "/tmp/soak-fixed.sock", "/tmp/soak-base.sock"
    common = ["--sample.interval=1s"]
    insts = [
        Instance("fixed-default", args.fixed, 19901, common + [f"--probe.socket={sock_fixed}"], args.out, True),
        Instance("fixed-full", args.fixed, 19902, common + ["--metrics.detail=full", "--nvml.process-interval=1s"], args.out, True),
        Instance("fixed-thread", args.fixed, 19903, common + ["--metrics.detail=full", "--nvml.isolation=thread", "--nvml.process-interval=1s"], args.out, True),
    ]
    if args.base:
        insts += [
            Instance("base-default", args.base, 19911, common + [f"--probe.socket={sock_base}"], args.out, True),
            Instance("base-full", args.base, 19912, common + ["--metrics.detail=full", "--nvml.process-interval=1s"], args.out, True),
            Instance("base-default-2", args.base, 19913, common, args.out, True),
        ]
    for inst in insts:
        inst.start()
    time.sleep(3)
    t0 = time.time()
    until = t0 + args.seconds
    stats = {"launched": 0, "probed": 0}
    sockets = [sock_fixed, sock_base] if args.base else [sock_fixed]
    threads = [threading.Thread(target=churn, args=(args, gpus, until, stats, sockets))]
    hammer_results = []
    if args.hammer and gpus > 1:
        groups = ["gpm", "gpm", "gpm", "gpm --serialize", "gpm-sample", "processes", "device",
                  "gpm+processes --serialize", "all"]
        groups += [f"gpm --device {d}" for d in range(gpus)]  # one process per GPU: a cross-process race
        threads.append(threading.Thread(target=hammer, args=(args, groups, hammer_results)))
    for th in threads:
        th.start()
    next_foot = 0.0
    while time.time() < until:
        t = time.time() - t0
        for inst in insts:
            inst.check(t)
            inst.scrape()
        if t >= next_foot:
            for inst in insts:
                if inst.name.startswith("fixed") and inst.proc.poll() is None:
                    rss, pss, fds = footprint(inst.proc.pid)
                    inst.footprints.append({"t": round(t), "rss_kib": rss, "pss_kib": pss,
                                            "fds": fds, "processes": len(descendants(inst.proc.pid))})
            next_foot += 10
        time.sleep(max(0.0, 1.0 - (time.time() - t0 - t)))
    for th in threads:
        th.join()
    summary = {"gpus": gpus, "seconds": args.seconds, "churn": stats, "hammer": hammer_results,
               "instances": []}
    for inst in insts:
        fp = [f for f in inst.footprints if f["t"] >= 120]
        growth = None
        if len(fp) >= 2 and fp[0]["rss_kib"]:
            growth = {"rss_first": fp[0]["rss_kib"], "rss_last": fp[-1]["rss_kib"],
                      "pss_first": fp[0]["pss_kib"], "pss_last": fp[-1]["pss_kib"],
                      "rss_max": max(f["rss_kib"] for f in fp),
                      "fds_first": fp[0]["fds"], "fds_last": fp[-1]["fds"],
                      "fds_max": max(f["fds"] for f in fp)}
        summary["instances"].append({
            "name": inst.name, "deaths": inst.deaths, "starts": inst.starts,
            "scrapes": inst.scrapes, "failed_scrapes": inst.failed_scrapes,
            "failed_debug": inst.debug_failed,
            "worker_restarts": metric_sum(inst.last_metrics, "tessera_nvml_worker_restarts_total"),
            "gpm_gate_errors": metric_sum(inst.last_metrics, "tessera_nvml_errors_total", 'call="gpm_gate"'),
            "samples": metric_sum(inst.last_metrics, "tessera_samples_total"),
            "footprint_min2_to_end": growth, "footprints": inst.footprints})
        inst.stop()
    with open(os.path.join(args.out, "soak.json"), "w") as f:
        json.dump(summary, f, indent=1)
    print(f"## soak: {gpus} GPUs, {args.seconds:.0f} s, {stats['launched']} CUDA processes "
          f"({stats['probed']} with the probe)")
    print("| instance | starts | deaths (signals) | scrapes failed | worker restarts | samples | RSS 2 min → end (KiB) | PSS 2 min → end (KiB) | fds 2 min → end |")
    print("|---|---|---|---|---|---|---|---|---|")
    for i in summary["instances"]:
        g = i["footprint_min2_to_end"] or {}
        sigs = ",".join(sorted({d["signal"] or str(d["rc"]) for d in i["deaths"]})) or "-"
        print(f"| {i['name']} | {i['starts']} | {len(i['deaths'])} ({sigs}) | "
              f"{i['failed_scrapes']}/{i['scrapes']} | {i['worker_restarts'] or 0:.0f} | {i['samples'] or 0:.0f} | "
              f"{g.get('rss_first', '-')} → {g.get('rss_last', '-')} (max {g.get('rss_max', '-')}) | "
              f"{g.get('pss_first', '-')} → {g.get('pss_last', '-')} | "
              f"{g.get('fds_first', '-')} → {g.get('fds_last', '-')} |")
    if hammer_results:
        print("\n| hammer group | result |\n|---|---|")
        for h in hammer_results:
            print(f"| {h['group']} | {h['signal'] or ('ok' if h['rc'] == 0 else 'rc ' + str(h['rc']))} |")


if __name__ == "__main__":
    main()

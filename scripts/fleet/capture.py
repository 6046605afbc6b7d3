#!/usr/bin/env python3
"""Captures what fleet nodes serve over one loop of the demo, for the history generator
(crates/fleet-history):

    capture.py --tessera BIN --nodes K --out DIR [--scrape 15] [--loop 120]

Starts `tessera --demo --demo.fleet-node=i` for i = 0..K-1 (sampling once a scrape, as
scripts/fleet.sh runs them), then scrapes every node's /metrics every --scrape seconds,
--loop / --scrape + 1 times: DIR/node-<i>/<j>.prom is node i at the j-th scrape. The last
scrape is a loop after the first, so the generator reads each counter's increase over a loop
from the first and the last. The demo's scenario loops every 120 s
(crates/fake-nvml/scenarios/demo.yaml, repeat_after_ms).
"""
import argparse
import os
import socket
import subprocess
import sys
import time
import urllib.request


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def fetch(url, timeout=10):
    with urllib.request.urlopen(url, timeout=timeout) as r:
        return r.read()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--tessera", required=True)
    ap.add_argument("--nodes", type=int, default=16)
    ap.add_argument("--out", required=True)
    ap.add_argument("--scrape", type=int, default=15)
    ap.add_argument("--loop", type=int, default=120)
    a = ap.parse_args()
    if a.loop % a.scrape:
        sys.exit("capture.py: --loop must be a multiple of --scrape")
    procs, ports = [], []
    env = dict(os.environ, TESSERA_LOG_LEVEL="warn")
    try:
        for i in range(a.nodes):
            port = free_port()
            procs.append(subprocess.Popen(
                [a.tessera, "--demo", f"--demo.fleet-node={i}", f"--web.listen-address=127.0.0.1:{port}",
                 f"--sample.interval={a.scrape}s", f"--nvml.process-interval={a.scrape}s"],
                env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
            ports.append(port)
        deadline = time.time() + 60
        for port in ports:
            while True:
                try:
                    fetch(f"http://127.0.0.1:{port}/readyz")
                    break
                except OSError:
                    if time.time() > deadline:
                        sys.exit(f"capture.py: node on port {port} not ready in 60 s")
                    time.sleep(0.5)
        # A full sampling round after ready, so the first capture holds every family.
        time.sleep(a.scrape)
        rounds = a.loop // a.scrape + 1
        t0 = time.time()
        for j in range(rounds):
            due = t0 + j * a.scrape
            time.sleep(max(0.0, due - time.time()))
            for i, port in enumerate(ports):
                d = os.path.join(a.out, f"node-{i}")
                os.makedirs(d, exist_ok=True)
                with open(os.path.join(d, f"{j}.prom"), "wb") as f:
                    f.write(fetch(f"http://127.0.0.1:{port}/metrics"))
            print(f"capture {j + 1}/{rounds}", flush=True)
    finally:
        for p in procs:
            p.terminate()
        for p in procs:
            p.wait()


if __name__ == "__main__":
    main()

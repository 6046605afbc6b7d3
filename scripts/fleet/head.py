#!/usr/bin/env python3
"""The last minutes of a replayed fleet's history into a Prometheus's head, through its
remote-write receiver, as a Prometheus that had scraped them would hold them (scripts/fleet.sh
and scripts/fleet/ab.sh --head-minutes).

    head.py --prom URL --fleet-history BIN --captures DIR --nodes N --origin S --interval 15 \
        --history-from S --from S --to S --promtool BIN --blocks DIR --work DIR [--senders K] \
        [--node-range A:B] [--also URL] [--catch-up] RULES.yaml...

The Prometheus holds blocks up to --from, scrapes nothing and evaluates no rules. This writes

1. every `*.rollup` group of RULES over [--history-from, --from) as blocks (`promtool tsdb
   create-blocks-from rules`, moved into --blocks): a block whose end is past the head's
   start would make Prometheus truncate its head there when it loads the block;
2. the raw samples of [--from, --to) window by window (`fleet-history remote-write`), every
   node's window before the next: the head refuses a sample an hour older than its newest;
3. after each window, each rollup's evaluations within it (instant queries at the instants
   promtool's evaluations continue at, every group interval), remote-written as a recording
   rule's output: the head's part of the rollups, in time order with the raw samples;
4. with --catch-up, windows on to the last whole interval before now until it is less than
   an interval behind, so the live scrapes that follow continue the history without a gap.

--node-range A:B writes only nodes A..B-1 (a shard's part of the fleet, scripts/fleet/shards.sh).
--also URL (a remote-write endpoint: a global VictoriaMetrics) gets the head's raw and rollup
samples too, as the Prometheus's own remote write would have sent them had it scraped and
recorded them live (it sends nothing older than its start, so the history must go there apart).

Prints the end it reached (seconds) as its last line.

    head.py wait-config URL     # after a SIGHUP: until the Prometheus scrapes and evaluates
"""
import argparse
import glob
import json
import os
import re
import shutil
import struct
import subprocess
import sys
import time
import urllib.parse
import urllib.request

import yaml

UNIT = {"s": 1, "m": 60, "h": 3600}


def seconds(d):
    return sum(int(n) * UNIT[u] for n, u in re.findall(r"(\d+)([smh])", d))


def varint(v):
    out = bytearray()
    while v >= 0x80:
        out.append((v & 0x7F) | 0x80)
        v >>= 7
    out.append(v)
    return bytes(out)


def field(tag, payload):
    return varint(tag << 3 | 2) + varint(len(payload)) + payload


def write_request(series):
    """series: [(labels dict, [(value, ms)...])] as a WriteRequest (the layout of
    crates/fleet-history/src/remote.rs, whose tests decode it with prost)."""
    out = bytearray()
    for labels, samples in series:
        body = bytearray()
        for k, v in sorted(labels.items()):
            body += field(1, field(1, k.encode()) + field(2, v.encode()))
        for value, ms in samples:
            body += field(2, b"\x09" + struct.pack("<d", value) + b"\x10" + varint(ms))
        out += field(1, bytes(body))
    return bytes(out)


def snappy(raw):
    """Literals only: valid snappy, uncompressed (as remote.rs writes it)."""
    out = bytearray(varint(len(raw)))
    for i in range(0, len(raw), 1 << 16):
        chunk = raw[i:i + (1 << 16)]
        n = len(chunk) - 1
        out += bytes([n << 2]) if n < 60 else bytes([60 << 2, n]) if n < 256 else bytes([61 << 2]) + struct.pack("<H", n)
        out += chunk
    return bytes(out)


def post(url, series):
    if not series:
        return
    req = urllib.request.Request(url, data=snappy(write_request(series)), method="POST", headers={
        "Content-Type": "application/x-protobuf", "Content-Encoding": "snappy",
        "X-Prometheus-Remote-Write-Version": "0.1.0"})
    try:
        urllib.request.urlopen(req, timeout=300).read()
    except urllib.error.HTTPError as e:
        sys.exit(f"head.py: remote write refused: {e.code} {e.read()[:500]!r}")


def query(prom, expr, t):
    qs = urllib.parse.urlencode({"query": expr, "time": t})
    with urllib.request.urlopen(f"{prom}/api/v1/query?{qs}", timeout=600) as r:
        return json.load(r)["data"]["result"]


def rollup_groups(files):
    groups = []
    for path in files:
        with open(path, encoding="utf-8") as f:
            groups += [g for g in yaml.safe_load(f).get("groups", []) if g["name"].endswith(".rollup")]
    return groups


def block_part(a, groups):
    """Step 1; returns each group's last evaluation instant there (None: no evaluation)."""
    last = {}
    os.makedirs(a.work, exist_ok=True)
    for i, g in enumerate(groups):
        path = os.path.join(a.work, f"rollup-{i}.yaml")
        staging = os.path.join(a.work, f"rollup-blocks-{i}")
        shutil.rmtree(staging, ignore_errors=True)
        with open(path, "w", encoding="utf-8") as f:
            group = {k: v for k, v in g.items() if k != "step"}
            yaml.safe_dump({"groups": [dict(group, interval=f"{g['step']}s")]}, f, sort_keys=False)
        r = subprocess.run([a.promtool, "tsdb", "create-blocks-from", "rules", "--url", a.prom,
                            "--start", str(a.history_from), "--end", str(a.start - 1), "--output-dir", staging, path],
                           stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        if r.returncode:
            sys.exit(f"head.py: promtool's rule backfill of {g['name']}: {r.stderr.strip()[-800:]}")
        # promtool aligns its evaluations to the group (a hash of its name and file, to the
        # millisecond): the head's part continues one interval after the last it wrote, which
        # is a block's end less a millisecond (every rule of the group evaluated there).
        blocks = glob.glob(os.path.join(staging, "01*"))
        ends = []
        for b in blocks:
            with open(os.path.join(b, "meta.json"), encoding="utf-8") as f:
                ends.append(json.load(f)["maxTime"] - 1)
            shutil.move(b, a.blocks)
        last[g["name"]] = max(ends) if ends else None
    return last


def wait_config(prom):
    for _ in range(480):
        targets = json.load(urllib.request.urlopen(prom + "/api/v1/targets", timeout=30))["data"]["activeTargets"]
        groups = json.load(urllib.request.urlopen(prom + "/api/v1/rules", timeout=30))["data"]["groups"]
        if targets and groups:
            return
        time.sleep(0.5)
    sys.exit("head.py: Prometheus did not load its scrape and rule configuration in 240 s")


def main():
    if sys.argv[1:2] == ["wait-config"]:
        return wait_config(sys.argv[2])
    ap = argparse.ArgumentParser()
    for k in ("prom", "fleet-history", "captures", "promtool", "blocks", "work"):
        ap.add_argument("--" + k, required=True)
    for k in ("nodes", "origin", "history-from", "to"):
        ap.add_argument("--" + k, type=int, required=True)
    ap.add_argument("--from", dest="start", type=int, required=True)
    ap.add_argument("--interval", type=int, default=15)
    ap.add_argument("--window", type=int, default=300)
    ap.add_argument("--senders", type=int, default=os.cpu_count() or 2)
    ap.add_argument("--catch-up", action="store_true")
    ap.add_argument("--node-range")
    ap.add_argument("--also")
    ap.add_argument("rules", nargs="*")
    a = ap.parse_args()
    t0 = time.time()
    groups = rollup_groups(a.rules)
    for g in groups:
        g["step"] = seconds(g.get("interval", "5m"))
    last = block_part(a, groups) if groups else {}
    # The next evaluation of each group at or after the head's start, in milliseconds.
    nxt = {}
    for g in groups:
        e = last.get(g["name"]) or a.start * 1000
        while e < a.start * 1000:
            e += g["step"] * 1000
        nxt[g["name"]] = e
    print(f"rollups over the blocks' part: {len(groups)} groups ({time.time() - t0:.0f} s)", flush=True)
    raw = rollup = 0
    targets = [a.prom + "/api/v1/write"] + ([a.also] if a.also else [])
    t, end = a.start, a.to
    while t < end:
        w_end = min(t + a.window, end)
        # The same window to every target at once (the same samples: one function of time).
        procs = [subprocess.Popen([a.fleet_history, "remote-write", "--captures", a.captures, "--nodes", str(a.nodes),
                                   "--origin", str(a.origin), "--interval", str(a.interval), "--from", str(t),
                                   "--to", str(w_end), "--senders", str(a.senders), "--window", str(a.window),
                                   "--url", url] + (["--node-range", a.node_range] if a.node_range else []),
                                  stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True) for url in targets]
        for url, p in zip(targets, procs):
            err = p.communicate()[1]
            if p.returncode:
                sys.exit(f"head.py: fleet-history remote-write [{t}, {w_end}) to {url}: {err.strip()[-800:]}")
            if url == targets[0]:
                raw += int(re.search(r"(\d+) samples", err).group(1))
        # Evaluations at instants the window's samples reach: a rule evaluated at e reads samples
        # up to e, all of which are in now.
        for g in groups:
            while nxt[g["name"]] < w_end * 1000:
                e = nxt[g["name"]]
                series = []
                for rule in g["rules"]:
                    if "record" not in rule:
                        continue
                    for s in query(a.prom, rule["expr"], f"{e / 1000:.3f}"):
                        labels = {k: v for k, v in s["metric"].items() if k != "__name__"}
                        labels.update(rule.get("labels") or {})
                        labels["__name__"] = rule["record"]
                        series.append((labels, [(float(s["value"][1]), e)]))
                for url in targets:
                    post(url, series)
                rollup += len(series)
                nxt[g["name"]] = e + g["step"] * 1000
        t = w_end
        if t >= end and a.catch_up:
            end = max(end, int(time.time()) // a.interval * a.interval)
            if end - t < a.interval:
                end = t
    print(f"head: {raw} raw samples and {rollup} rollup samples over [{a.start}, {t}) in {time.time() - t0:.0f} s",
          flush=True)
    print(t)


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""Every rule group's rounds on one or more Prometheus servers at once (scripts/fleet/ab.sh's
two sides, scripts/fleet/shards.sh's shards).

    group_times.py --side NAME=URL... --seconds S --eval E --history-end T [--out FILE.json] \
        [--info KEY=VALUE...]

For S seconds, every round of every group is read from each server's
prometheus_rule_group_last_duration_seconds (one value per evaluation, keyed by its
timestamp; polled three times an interval, so no round is missed) and every rule's
evaluationTime from /api/v1/rules, with the most instances each alerting rule held at once
(every instance costs its labels' and annotations' template expansions). Prints, per group,
each side's median / max and rounds and the medians of the first and second half of the
rounds, then each side's slowest rules and its alerting rules with the most instances, and the
host's cores busy and stolen over the window, by command (/proc);
--out writes them as JSON with every round and the age of the live data at it (seconds since
--history-end, where the backfilled history ends: a window longer than that age still reads
the history). --info adds KEY: VALUE to the JSON (integers where they parse).
"""
import argparse
import json
import os
import re
import statistics
import time
import urllib.request

LINE = re.compile(r'^prometheus_rule_group_last_(duration_seconds|evaluation_timestamp_seconds)'
                  r'\{rule_group="[^"]*;([^"]*)"\} (\S+)$')


def poll(url, rounds, rules, alerts):
    got = {}
    with urllib.request.urlopen(url + "/metrics", timeout=30) as r:
        for line in r.read().decode().splitlines():
            m = LINE.match(line)
            if m:
                got.setdefault(m.group(2), {})[m.group(1)] = float(m.group(3))
    for g, v in got.items():
        if v.get("evaluation_timestamp_seconds", 0) > 0:
            rounds.setdefault(g, {})[v["evaluation_timestamp_seconds"]] = v["duration_seconds"]
    with urllib.request.urlopen(url + "/api/v1/rules", timeout=30) as r:
        for g in json.load(r)["data"]["groups"]:
            for rule in g["rules"]:
                rules.setdefault(rule["name"], {})[rule.get("lastEvaluation")] = rule.get("evaluationTime") or 0.0
                if rule.get("type") == "alerting":
                    n = len(rule.get("alerts") or [])
                    alerts[rule["name"]] = max(alerts.get(rule["name"], 0), n)


def cpu_ticks():
    """The host's busy and stolen ticks (/proc/stat) and every command's own ticks (/proc/PID/stat),
    so a window's CPU can be split by what used it."""
    with open("/proc/stat", encoding="ascii") as f:
        v = [int(x) for x in f.readline().split()[1:]]
    host = {"busy": sum(v) - v[3] - v[4] - v[7], "steal": v[7]}
    by_comm = {}
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            with open(f"/proc/{pid}/stat", encoding="utf-8", errors="replace") as f:
                st = f.read()
        except OSError:
            continue
        comm = st[st.index("(") + 1:st.rindex(")")]
        fields = st[st.rindex(")") + 2:].split()
        by_comm[comm] = by_comm.get(comm, 0) + int(fields[11]) + int(fields[12])
    return host, by_comm


def cpu_cores(before, after, seconds):
    hz = os.sysconf("SC_CLK_TCK")
    host = {k: round((after[0][k] - before[0][k]) / hz / seconds, 2) for k in after[0]}
    comms = {c: round((t - before[1].get(c, 0)) / hz / seconds, 2) for c, t in after[1].items()}
    return host, dict(sorted(((c, v) for c, v in comms.items() if v >= 0.05), key=lambda kv: -kv[1]))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--side", action="append", required=True, help="NAME=URL")
    ap.add_argument("--seconds", type=int, required=True)
    ap.add_argument("--eval", type=int, default=15)
    ap.add_argument("--history-end", type=float, required=True)
    ap.add_argument("--out")
    ap.add_argument("--info", action="append", default=[])
    a = ap.parse_args()
    sides = dict(s.split("=", 1) for s in a.side)
    rounds = {s: {} for s in sides}
    rules = {s: {} for s in sides}
    alerts = {s: {} for s in sides}
    start, ticks0 = time.time(), cpu_ticks()
    end = start + a.seconds
    load = []
    while time.time() < end:
        for s, url in sides.items():
            poll(url, rounds[s], rules[s], alerts[s])
        with open("/proc/loadavg", encoding="ascii") as f:
            load.append(float(f.read().split()[0]))
        time.sleep(a.eval / 3)
    host_cores, comm_cores = cpu_cores(ticks0, cpu_ticks(), time.time() - start)
    res = {"seconds": a.seconds, "cpu_cores": {"host": host_cores, "by_command": comm_cores}, "sides": sides, "history_end": a.history_end,
           "load_average_1m": {"median": statistics.median(load), "max": max(load)},
           "groups": {}, "rules": {}, "rounds": {}, "alerts": alerts}
    for kv in a.info:
        k, v = kv.split("=", 1)
        res[k] = int(v) if v.isdigit() else v
    print(f"\n{a.seconds} s, load average median {statistics.median(load):.1f} (max {max(load):.1f}),"
          f" {host_cores['busy']} cores busy, {host_cores['steal']} stolen; by command: "
          + ", ".join(f"{c} {v}" for c, v in list(comm_cores.items())[:8]))
    width = 26
    print(f"{'group':30} " + " ".join(f"{s + ' median / max s (rounds)':>{width}}" for s in sides)
          + "   medians, first / second half")
    for g in sorted(set().union(*rounds.values())):
        row, halves = {}, []
        for s in sides:
            got = sorted(rounds[s].get(g, {}).items())
            v = [d for _, d in got]
            row[s] = {"median": statistics.median(v), "max": max(v), "rounds": len(v)} if v else None
            res["rounds"].setdefault(g, {})[s] = [[round(t - a.history_end, 1), round(d, 4)] for t, d in got]
            h = len(v) // 2
            halves.append(f"{statistics.median(v[:h]):.3f} / {statistics.median(v[h:]):.3f}" if h else "—")
        res["groups"][g] = row

        def fmt(r):
            return f"{r['median']:.3f} / {r['max']:.3f} ({r['rounds']})" if r else "—"
        print(f"{g:30} " + " ".join(f"{fmt(row[s]):>{width}}" for s in sides) + "   " + ", ".join(halves))
    for s in sides:
        med = {n: statistics.median(v.values()) for n, v in rules[s].items() if v}
        top = sorted(med.items(), key=lambda kv: -kv[1])[:12]
        res["rules"][s] = {n: round(t, 4) for n, t in sorted(med.items())}
        print(f"slowest rules {s} (median s): " + ", ".join(f"{n} {t:.3f}" for n, t in top))
        most = sorted(alerts[s].items(), key=lambda kv: -kv[1])[:6]
        print(f"most alert instances {s}: " + ", ".join(f"{n} {c}" for n, c in most))
    worst = max(((r["median"], g, s) for g, row in res["groups"].items() for s, r in row.items() if r),
                default=None)
    if worst:
        print(f"slowest group median: {worst[1]} on {worst[2]}, {worst[0]:.3f} s")
    if a.out:
        with open(a.out, "w", encoding="utf-8") as f:
            json.dump(res, f, indent=1, sort_keys=True)


if __name__ == "__main__":
    main()

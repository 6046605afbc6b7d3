"""Could a figure the tenant does not write arbitrate a forged timeline (issue 42)? A forger's
timeline is its own: only NVML's readings are not. This reads a corpus run's reads and puts
each tenant's published figure beside them:

- per process: NVML's SM utilization for the tenant's pid (`nvmlDeviceGetProcessUtilization`,
  as tessera read it at the same instant), honest reads against forged ones;
- per device: NVML's busy over the figures' window less the figures' sum (what no timeline
  explains), honest draws against draws with a forger.

A check can dispute a forger only where its reads leave the honest spread; the spread is
measured here, the catch rate of a rule set at the honest 1st/99th percentiles with it.

  arbiter.py CORPUS.jsonl[.xz] ...   (heavy time-sliced draws; MPS books processes to its server)"""
import json
import lzma
import statistics
import sys
from collections import defaultdict


def draws(paths):
    for path in paths:
        opener = lzma.open if path.endswith(".xz") else open
        with opener(path, "rt") as f:
            for line in f:
                d = json.loads(line)
                if d.get("type") == "draw" and d.get("class") == "heavy" and d.get("mode") == "ts":
                    yield path, d


def pairs(d, pid):
    """(published figure, NVML's per-process SM utilization) of each read that has both."""
    out = []
    for r in d["reads"]:
        fig = (r.get("p", {}).get(pid) or [None])[0]
        gpu = next(iter(r.get("gpu", {}).values()), {})
        nvml = (gpu.get("procs", {}).get(pid) or [None])[0]
        if fig is not None and nvml is not None:
            out.append((fig, nvml))
    return out


def unexplained(d):
    """Per read: NVML's busy over the figures' window less the sum of the published figures."""
    out = []
    for r in d["reads"]:
        gpu = next(iter(r.get("gpu", {}).values()), {})
        busy, figs = gpu.get("device_window"), [v[0] for v in r.get("p", {}).values() if v and v[0] is not None]
        if busy is not None and figs:
            out.append(busy - sum(figs))
    return out


def pct(xs, p):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(p * len(xs)))] if xs else float("nan")


def ratio(fig, nvml):
    return fig / nvml if nvml > 0 else float("inf")


def main():
    honest, by_kind, per_draw, zero, liars = [], defaultdict(list), [], 0, []
    honest_unexplained, liar_unexplained = [], defaultdict(list)
    for path, d in draws(sys.argv[1:]):
        liar_here = next((t["liar"] for t in d["tenants"] if t.get("liar")), None)
        (liar_unexplained[liar_here] if liar_here else honest_unexplained).extend(unexplained(d))
        for t in d["tenants"]:
            if t["kind"] == "holder" or t.get("pid") is None:
                continue
            rows = pairs(d, str(t["pid"]))
            if not rows:
                continue
            if t.get("liar"):
                liars.append((path, d["draw"], t["liar"], t["kind"], t.get("truth"), rows))
                continue
            if liar_here:
                continue
            rs = [ratio(f, n) for f, n in rows]
            honest += rs
            by_kind[t["kind"]] += rs
            zero += sum(1 for _, n in rows if n <= 0)
            per_draw.append(statistics.mean(f for f, _ in rows) / max(1e-9, statistics.mean(n for _, n in rows)))
    if not honest:
        print("no heavy time-sliced reads")
        return
    lo, hi = pct(honest, 0.01), pct(honest, 0.99)
    print(f"honest reads: {len(honest)}; NVML booked the tenant 0 in {zero} ({zero / len(honest):.0%})")
    print("| | reads | figure / NVML 1st | 5th | median | 95th | 99th |")
    print("|---|---|---|---|---|---|---|")
    for name, xs in [("all honest", honest)] + sorted(by_kind.items()):
        print(f"| {name} | {len(xs)} | " + " | ".join(f"{pct(xs, p):.2f}" for p in (0.01, 0.05, 0.5, 0.95, 0.99)) + " |")
    print(f"per tenant-draw (mean figure / mean NVML): {len(per_draw)} tenant-draws, "
          f"{min(per_draw):.2f}-{max(per_draw):.2f}, 5th/95th {pct(per_draw, 0.05):.2f}/{pct(per_draw, 0.95):.2f}")
    print(f"\nforgers: disputed where figure / NVML leaves the honest 1st-99th ({lo:.2f}-{hi:.2f})")
    print("| run | draw | lie | kind | truth | reads | outside | median figure / NVML |")
    print("|---|---|---|---|---|---|---|---|")
    caught = total = 0
    for path, draw, lie, kind, truth, rows in liars:
        rs = [ratio(f, n) for f, n in rows]
        out = sum(1 for r in rs if not lo <= r <= hi)
        caught, total = caught + out, total + len(rs)
        run = path.split("/")[-2]
        print(f"| {run} | {draw} | {lie} | {kind} | {truth:.3f} | {len(rs)} | {out} | {statistics.median(rs):.2f} |")
    if total:
        false = sum(1 for r in honest if not lo <= r <= hi)
        print(f"caught {caught} of {total} forged reads ({caught / total:.0%}); honest reads outside: "
              f"{false} of {len(honest)}")
    if honest_unexplained:
        print(f"\nNVML busy less the figures' sum, honest draws: {len(honest_unexplained)} reads, "
              f"1st/median/99th {pct(honest_unexplained, 0.01):+.3f}/{pct(honest_unexplained, 0.5):+.3f}/"
              f"{pct(honest_unexplained, 0.99):+.3f}")
        for lie, xs in sorted(liar_unexplained.items()):
            print(f"  beside {lie}: {len(xs)} reads, median {pct(xs, 0.5):+.3f}, "
                  f"outside the honest 1st-99th: {sum(1 for x in xs if not pct(honest_unexplained, 0.01) <= x <= pct(honest_unexplained, 0.99))}")


if __name__ == "__main__":
    main()

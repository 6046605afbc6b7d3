"""The bounds' side of replay.py (issue 42): floors and ceilings rebuilt from a run's record
logs over each read's window, and the sampling margins they widen by. Run through replay.py
(`--bounds`, `--margins`)."""
import collections
import glob
import json
import math
import os
import statistics
import sys

from replay import (BUCKET, LAG, MAKERS, OFFSET, WINDOW, cached_line, open_corpus, published_reads,
                    run_clocks, timelines_of, window_truth)


def bounds_window(lines, floors, lo_ms, hi_ms):
    """Per tenant over [lo_ms, hi_ms): (own, lower, upper) in shares of the common milliseconds.
    `own`: a lone millisecond is its coverage, a contended one its solo share (the point rule);
    `lower`: the same from the floor solos (each kernel at most its estimate); `upper`: in a
    contended millisecond, its coverage less what the others' floor solos must have run there,
    never below its own solo."""
    n = len(lines)
    out = [[0.0, 0.0, 0.0] for _ in range(n)]
    common = 0
    for b in range(lo_ms, hi_ms):
        if not all(tr(b) for _, tr in lines):
            continue
        common += 1
        cov = [tl[b][0] / BUCKET if b in tl else 0.0 for tl, _ in lines]
        solo = [tl[b][1] / BUCKET if b in tl else 0.0 for tl, _ in lines]
        flo = [min(fl[b][1] / BUCKET, solo[i]) if b in fl else 0.0 for i, fl in enumerate(floors)]
        cs, ss, fs = sum(cov), sum(solo), sum(flo)
        for i in range(n):
            c = cov[i]
            if c <= 0:
                continue
            o = out[i]
            if cs - c > 0:
                o[0] += c if cs <= 1.0 else solo[i] / max(ss, 1.0)
                o[1] += flo[i] / max(fs, 1.0)
                o[2] += min(c, max(solo[i], 1.0 - (fs - flo[i])))
            else:
                # Alone in the millisecond: the floor leaves out what a hidden tenant could
                # have run inside its span (as src/model/compute/timeslice.rs does).
                o[0] += c
                o[1] += flo[i]
                o[2] += c
    return [[v / common for v in o] for o in out] if common else None, common


def clocks(out_dir):
    """(unix time, SM MHz) from the run's clocks.csv (nvidia-smi's local timestamps: UTC there),
    and the calibration's median clock (before the first draw)."""
    import datetime
    path = os.path.join(out_dir, "l", "logs", "clocks.csv")
    rows = []
    if os.path.exists(path):
        for line in open(path):
            p = [x.strip() for x in line.split(",")]
            try:
                t = datetime.datetime.strptime(p[0], "%Y/%m/%d %H:%M:%S.%f").replace(
                    tzinfo=datetime.timezone.utc).timestamp()
                rows.append((t, float(p[2]), float(p[4])))
            except (ValueError, IndexError):
                pass
    return rows


def clock_factor(rows, lo, hi, calib_mhz):
    """Calibration clock over the window's mean SM clock: a compute-bound kernel's time scales
    by it (1 where unknown)."""
    w = [r[1] for r in rows if lo <= r[0] < hi]
    return calib_mhz / statistics.mean(w) if w and calib_mhz else 1.0


def evaluate_bounds(out_dir, point="ctx2-band", floor="ctx2-fastest"):
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import analyze
    logs = {p.rsplit(".", 1)[-1]: p for p in glob.glob(os.path.join(out_dir, "rec", "*"))}
    cache = {}
    res = collections.defaultdict(list)
    rows = clocks(out_dir)
    draws = [json.loads(line) for line in open_corpus(out_dir)]
    first = min((d["start"] for d in draws if d.get("type") == "draw"), default=0)
    cal = [r[1] for r in rows if r[0] < first - 5 and r[2] > 50]
    calib_mhz = statistics.median(cal) if cal else None
    for d in draws:
        if d.get("type") != "draw" or d.get("mode") == "alone":
            continue
        tens = [t for t in d["tenants"] if t.get("pid") is not None and t["kind"] != "holder"]
        pids = [str(t["pid"]) for t in tens]
        if not all(p in logs for p in pids):
            continue
        for p in pids:
            if p not in cache:
                fl, _, _ = timelines_of(logs[p], MAKERS[floor])
                cache[p] = cached_line(logs[p], MAKERS[point]) + (fl,)
        for r in d["reads"]:
            hi = int((r["t"] - LAG - OFFSET) * 1000)
            lo = hi - int(WINDOW * 1000)
            if any(cache[p][2] < hi * BUCKET for p in pids):
                continue
            out, common = bounds_window([cache[p][:2] for p in pids], [cache[p][3] for p in pids], lo, hi)
            if not out or common < 1000:
                continue
            k = clock_factor(rows, lo / 1000, hi / 1000, calib_mhz)
            for ten, (own, low, up) in zip(tens, out):
                truth = analyze.read_truth(ten, r["t"], sampled=True)
                if ten.get("liar") or not truth or truth < 0.02:
                    continue
                res[ten["kind"]].append((truth, own, low, up))
                res[ten["kind"] + " (clock-corrected truth)"].append((truth * k, own, low, up))
    print("calibration clock", calib_mhz)
    for kind, v in sorted(res.items()):
        inside = sum(1 for t, o, l, u in v if l - 0.01 <= t <= u + 0.01)
        below = sum(1 for t, o, l, u in v if t < l - 0.01)
        width = sum(u - l for t, o, l, u in v) / len(v)
        acc = sum(1 for t, o, l, u in v if abs(o - t) <= 0.1 * t)
        print(f"{kind}: {len(v)} reads; point within 10 %: {acc}; bounds contain {inside} (truth below the floor in "
              f"{below}), mean width {width:.3f}, mean floor/truth {sum(l / t for t, o, l, u in v) / len(v):.3f}, "
              f"ceiling/truth {sum(u / t for t, o, l, u in v) / len(v):.3f}")


def ratio_margin(seq):
    """Three standard errors of a sampled ratio, as src/model/compute/sampling.rs reads it: `seq`
    is the window's milliseconds, None where not counted, else (base, part); 0 where every one
    is counted, None where the sample has fewer than four runs."""
    units, run, picked = [], False, 0
    for x in seq:
        if x is None:
            run = False
            continue
        picked += 1
        if not run:
            units.append([0.0, 0.0])
            run = True
        units[-1][0] += x[0]
        units[-1][1] += x[1]
    if picked == len(seq):
        return 0.0
    n, base = len(units), sum(u[0] for u in units)
    if n < 4 or base <= 0:
        return None
    ratio = sum(u[1] for u in units) / base
    spread = sum((u[1] - ratio * u[0]) ** 2 for u in units) / (n - 1)
    return 3 * math.sqrt(max(0.0, 1 - picked / len(seq)) * spread / (n * (base / n) ** 2))


def bound_parts(lines, floors, lo_ms, hi_ms):
    """Per millisecond of [lo_ms, hi_ms): None where some timeline did not trace it, else per
    tenant (covered, its part of the floor, its part of the ceiling), by the time-sliced rules of
    src/model/compute/timeslice.rs (`timeline_shares`)."""
    out = []
    for b in range(lo_ms, hi_ms):
        if not all(tr(b) for _, tr in lines):
            out.append(None)
            continue
        cov = [tl[b][0] / BUCKET if b in tl else 0.0 for tl, _ in lines]
        so = [min(tl[b][1] / BUCKET, cov[i]) if b in tl else 0.0 for i, (tl, _) in enumerate(lines)]
        fl = [min(f[b][1] / BUCKET, so[i]) if b in f else 0.0 for i, f in enumerate(floors)]
        cs, fs = sum(cov), sum(fl)
        row = []
        for i, c in enumerate(cov):
            if c <= 0:
                row.append((0.0, 0.0, 0.0))
            elif cs - c > 0:
                row.append((c, c if cs <= 1 else fl[i] / max(fs, 1.0), min(c, max(so[i], 1 - (fs - fl[i])))))
            else:
                row.append((c, fl[i], c))
        out.append(row)
    return out


def evaluate_margins(out_dir, point="ctx2-band", floor="ctx2-fastest"):
    """Time-sliced draws whose tenants' logs all came back and whose common milliseconds are a
    sample of the published window (a probe tracing in duty cycles): per read, each honest
    tenant's floor and ceiling widened by the coverage's margin (the rule before 94effa8) and by
    their own, against the truth over the window and its clock band (analyze.py)."""
    clk = run_clocks(out_dir)
    res = collections.defaultdict(list)

    def line_of(path):
        return cached_line(path, MAKERS[point]) + (timelines_of(path, MAKERS[floor])[0],)
    for d, tens, cached, r, w, lo, hi in published_reads(out_dir, "ts", line_of):
        rows = bound_parts([c[:2] for c in cached], [c[3] for c in cached], lo, hi)
        common = [x for x in rows if x is not None]
        if len(common) < 1000 or len(common) == len(rows):
            continue
        for i, t in enumerate(tens):
            truth = window_truth(t, w)
            if t.get("liar") or truth < 0.02:
                continue
            m = [ratio_margin([None if x is None else (1.0, x[i][j]) for x in rows]) for j in range(3)]
            if None in m:
                continue
            low, up = (sum(x[i][j] for x in common) / len(common) for j in (1, 2))
            res[t["kind"]].append((truth, clk.band(t["kind"], truth, w[0], w[1]), low, up, m))
    res["all"] = [x for v in list(res.values()) for x in v]
    for kind, v in sorted(res.items()):
        line = f"{kind:10s} {len(v):3d} reads"
        for name, pick in (("coverage's margin", lambda m: (m[0], m[0])), ("own margins", lambda m: (m[1], m[2]))):
            got = [(t, band, low - pick(m)[0], up + pick(m)[1]) for t, band, low, up, m in v]
            held = sum(1 for t, _, lo_, up_ in got if lo_ - 0.01 <= t <= up_ + 0.01)
            band = sum(1 for _, (bl, bh), lo_, up_ in got if lo_ - 0.01 <= bh and bl <= up_ + 0.01)
            width = sum(up_ - lo_ for *_, lo_, up_ in got) / len(got)
            line += f" | {name}: contain {held} (band {band}), width {width:.3f}"
        print(line)

"""Replays the probes' kernel records of a corpus run (RECORD_LOG=1) offline: rebuilds each
tenant's millisecond timeline with a chosen solo estimator, and reads the time-sliced split's
stages over each read's window beside the request-log truth (issue 42). Measurement only: the
shipped rules are the Rust code's; this is where estimators and rules are compared on real
records before one is built.

  replay.py RUN_OUT [--estimators ctx2-band,...] [--split | --forgers | --bounds | --margins |
                    --mps-lone | --lone-scale | --local-scale | --deficit]

RUN_OUT: a run's output folder (corpus.jsonl, records.tar.xz unpacked to rec/)."""
import argparse
import bisect
import collections
import json
import lzma
import os
import statistics
import sys


def open_corpus(out_dir):
    """A run's corpus.jsonl, or corpus.jsonl.xz as lab/data keeps it."""
    path = os.path.join(out_dir, "corpus.jsonl")
    return open(path) if os.path.exists(path) else lzma.open(path + ".xz", "rt")


BUCKET = 1_000_000
WINDOW, LAG, OFFSET = 5.0, 2.0, 0.5


def load(path):
    """Kernels admitted by the probe's rule (wholly inside one traced stretch), with the CUPTI
    to unix offset from the log's T lines."""
    ks, stretches, on, start, offsets = [], [], None, 0, []
    shapes = {}
    with open(path, errors="replace") as f:
        for line in f:
            p = line.split()
            if not p:
                continue
            if p[0] == "R":
                t = int(p[2])
                if p[1] in ("on", "attach"):
                    on = t if on is None else on
                elif p[1] == "off" and on is not None:
                    stretches.append((on, t))
                    on = None
            elif p[0] == "K" and len(p) >= 5:
                start += int(p[2])
                ks.append((start, start + int(p[3]), p[1], int(p[4])))
            elif p[0] == "S" and len(p) >= 11:
                shapes[p[1]] = (p[9][:60], p[10])
            elif p[0] == "T":
                offsets.append(int(p[2]) - int(p[1]))
    if on is not None:
        stretches.append((on, 1 << 62))
    starts = [s for s, _ in stretches]
    keep = []
    for k in ks:
        i = bisect.bisect_right(starts, k[0]) - 1
        if i >= 0 and k[1] <= stretches[i][1]:
            keep.append(k)
    keep.sort()
    off = int(statistics.median(offsets)) if offsets else 0
    return keep, stretches, off, shapes


class Fastest:
    """The shipped estimator (crates/probe/src/solo.rs at 52f3cff): running mean of runs near
    the fastest mode; a kernel counts min(estimate, its duration)."""
    BAND, W, CONF = 1.15, 1 / 16, 30e9

    def __init__(self):
        self.best = {}

    def solo(self, shape, d, end):
        e = self.best.get(shape, (d, end))
        est, conf = e
        if d * self.BAND < est or end - conf > self.CONF:
            e = (d, end)
        elif d <= est * self.BAND:
            e = (est + (d - est) * self.W, end)
        self.best[shape] = e
        return self.count(e[0], d)

    def count(self, est, d):
        return min(round(est), d)


class Band(Fastest):
    """The same estimate; a run within the band counts whole (it was not stretched), only a
    run past it counts the estimate."""

    def count(self, est, d):
        return d if d <= est * self.BAND else round(est)


class Median:
    """The median of the last 15 runs of the shape; a run within 15 % of it counts whole."""
    N, BAND = 15, 1.15

    def __init__(self):
        self.runs = collections.defaultdict(collections.deque)

    def solo(self, shape, d, end):
        r = self.runs[shape]
        r.append(d)
        if len(r) > self.N:
            r.popleft()
        est = sorted(r)[len(r) // 2]
        return d if d <= est * self.BAND else est


class Clusters:
    """Durations that recur are real; a long one that does not recur was stretched. Per shape,
    up to 4 cluster centres: a run within 15 % of one counts whole and refines it; a run faster
    than all starts a new one; a longer run that matches no centre is a candidate, promoted after
    3 runs within 15 % of each other; until then (and for every run that never recurs) it counts
    the hit-weighted mean of the centres below it."""
    BAND, W, K, PROMOTE = 1.15, 1 / 16, 4, 3

    def __init__(self):
        self.c = {}

    def solo(self, shape, d, end):
        cl, cand = self.c.setdefault(shape, ([], []))
        for x in cl:
            if x[0] / self.BAND <= d <= x[0] * self.BAND:
                x[0] += (d - x[0]) * self.W
                x[1] += 1
                return d
        if not cl or d * self.BAND < min(x[0] for x in cl):
            cl.append([float(d), 1])
            self.trim(cl)
            return d
        for y in cand:
            if y[0] / self.BAND <= d <= y[0] * self.BAND:
                y[0] += (d - y[0]) / (y[1] + 1)
                y[1] += 1
                if y[1] >= self.PROMOTE:
                    cand.remove(y)
                    cl.append([y[0], y[1]])
                    self.trim(cl)
                    return d
                break
        else:
            cand.append([float(d), 1])
            if len(cand) > 8:
                cand.pop(0)
        below = [x for x in cl if x[0] < d]
        w = sum(x[1] for x in below)
        return round(sum(x[0] * x[1] for x in below) / w) if w else d

    def trim(self, cl):
        if len(cl) > self.K:
            cl.remove(min(cl, key=lambda x: x[1]))
        if sum(x[1] for x in cl) > 4096:
            for x in cl:
                x[1] = max(1, x[1] // 2)


ESTIMATORS = {"fastest": Fastest, "band": Band, "median": Median}


def timeline(ks, est):
    """Per bucket: [covered ns, solo ns], the union of spans (a span counts only what earlier
    ones did not cover), each span's solo spread over it."""
    tl = collections.defaultdict(lambda: [0, 0.0])
    covered_until = 0
    for s, e, shape, _ in ks:
        d = e - s
        solo = est.solo(shape, d, e) if est else _
        if solo is None:
            solo = d
        if e <= covered_until:
            continue
        spread_span(tl, max(s, covered_until), e, solo / d if d > 0 else 0.0)
        covered_until = e
    return tl


def spread_span(tl, s, e, solo_ratio, raw_ratio=None):
    """Adds the part [s, e) of a span that earlier ones did not cover to its buckets: covered
    time (at most the bucket), solo time at `solo_ratio` of it (at most the covered), and, where
    a third column is kept, the raw estimate at `raw_ratio`."""
    for b in range(s // BUCKET, (e - 1) // BUCKET + 1):
        lo, hi = max(s, b * BUCKET), min(e, (b + 1) * BUCKET)
        if hi > lo:
            x = tl[b]
            x[0] = min(BUCKET, x[0] + hi - lo)
            x[1] = min(x[0], x[1] + (hi - lo) * solo_ratio)
            if raw_ratio is not None:
                x[2] += (hi - lo) * raw_ratio


def traced_fn(stretches):
    starts = [s for s, _ in stretches]

    def traced(b):
        lo, hi = b * BUCKET, (b + 1) * BUCKET
        i = bisect.bisect_right(starts, lo) - 1
        return i >= 0 and hi <= stretches[i][1]
    return traced


class DurationContext:
    """Any estimator keyed also by the shapes of the two kernels before it and the octave of
    the one just before's duration (outside graphs): a CNN's batch-norm and element-wise kernels
    launch one grid for every batch, and only the time the kernel before took tells a batch of
    32 from one of 128."""

    def __init__(self, inner, graph_of):
        self.inner, self.graph_of = inner, graph_of
        self.prev = collections.deque(maxlen=2)
        self.prev_octave = 0

    def solo(self, shape, d, end):
        key = shape if self.graph_of.get(shape, "0") != "0" else (shape, tuple(self.prev), self.prev_octave)
        self.prev.append(shape)
        self.prev_octave = max(d, 1).bit_length()
        return self.inner.solo(key, d, end)


class Context:
    """Any estimator, keyed also by the shape of the kernel before it in the record stream
    (outside CUDA graphs): cuBLAS's persistent GEMM kernels launch one grid for every problem
    size, so in an eager model one shape serves GEMMs 8x apart; the kernel before them (a layer
    norm, an add) launches a grid that follows the size."""

    def __init__(self, inner, graph_of, depth=1):
        self.inner, self.graph_of, self.depth = inner, graph_of, depth
        self.prev = collections.deque(maxlen=depth)

    def solo(self, shape, d, end):
        key = shape if self.graph_of.get(shape, "0") != "0" else (shape, tuple(self.prev))
        self.prev.append(shape)
        return self.inner.solo(key, d, end)


def kernels_by_second(path, make):
    """Per unix second: (Σ span union ns, Σ solo ns) of the log's admitted kernels."""
    ks, _, off, shapes = load(path)
    graph_of = {sid: node for sid, (_, node) in shapes.items()}
    est = make(graph_of)
    per = collections.defaultdict(lambda: [0.0, 0.0])
    covered_until = 0
    for s, e, shape, _ in ks:
        d = e - s
        solo = est.solo(shape, d, e)
        if e <= covered_until:
            continue
        s2 = max(s, covered_until)
        frac = (e - s2) / d if d else 0.0
        sec = (s2 + off) // 1_000_000_000
        per[sec][0] += e - s2
        per[sec][1] += solo * frac
        covered_until = e
    return per


MAKERS = {
    "fastest": lambda g: Fastest(),
    "band": lambda g: Band(),
    "median": lambda g: Median(),
    "ctx-fastest": lambda g: Context(Fastest(), g),
    "ctx-band": lambda g: Context(Band(), g),
    "ctx-median": lambda g: Context(Median(), g),
    "ctxdur-band": lambda g: DurationContext(Band(), g),
    "ctxdur-fastest": lambda g: DurationContext(Fastest(), g),
    "clusters": lambda g: Clusters(),
    "ctx2-clusters": lambda g: Context(Clusters(), g, 2),
    "ctx1-clusters": lambda g: Context(Clusters(), g, 1),
    "ctx2-fastest": lambda g: Context(Fastest(), g, 2),
    "ctx2-band": lambda g: Context(Band(), g, 2),
    "ctx3-fastest": lambda g: Context(Fastest(), g, 3),
    "ctx3-band": lambda g: Context(Band(), g, 3),
}


def evaluate(out_dir, makers):
    """Σ solo over each read's window against the requests' truth over the same window, per
    estimator and kind: the relative error's median, 5th and 95th percentiles."""
    import glob
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import analyze
    logs = {}
    for p in glob.glob(os.path.join(out_dir, "rec", "*")):
        pid = p.rsplit(".", 1)[-1]
        logs.setdefault(pid, []).append(p)
    draws = [json.loads(line) for line in open_corpus(out_dir)]
    draws = [d for d in draws if d.get("type") == "draw"]
    per_log = {}
    res = collections.defaultdict(lambda: collections.defaultdict(list))
    for d in draws:
        for ten in d["tenants"]:
            pid = str(ten.get("pid"))
            if pid not in logs or ten.get("liar") or ten.get("reqs") is None or ten["kind"] == "holder":
                continue
            for name, make in makers.items():
                key = (pid, name)
                if key not in per_log:
                    per_log[key] = kernels_by_second(logs[pid][0], make)
                per = per_log[key]
                for r in d["reads"]:
                    t = r["t"]
                    lo, hi = t - WINDOW - OFFSET, t - OFFSET
                    truth = analyze.read_truth(ten, t)
                    if not truth or truth < 0.02:
                        continue
                    secs = range(int(lo), int(hi) + 1)
                    # whole seconds only: the window rounded to seconds on both sides
                    span = sum(per[s][0] for s in secs if lo <= s and s + 1 <= hi) / 1e9
                    solo = sum(per[s][1] for s in secs if lo <= s and s + 1 <= hi) / 1e9
                    n = sum(1 for s in secs if lo <= s and s + 1 <= hi)
                    if n < 3:
                        continue
                    tr = sum(k for m, k in ten["reqs"] if int(lo) + 1 <= m < int(lo) + 1 + n) / 1000 / n
                    if tr < 0.02:
                        continue
                    res[(d.get("mode"), ten["kind"])][name].append(((solo / n) - tr) / tr)
                    res[(d.get("mode"), ten["kind"])]["spans"].append(((span / n) - tr) / tr)
    for (mode, kind), by in sorted(res.items()):
        print(f"{mode} {kind}")
        for name, v in by.items():
            v.sort()
            ok = sum(1 for x in v if abs(x) <= 0.10)
            print(f"   {name:12s} n {len(v):4d} median {100 * v[len(v) // 2]:+6.1f} %  p5 {100 * v[len(v) // 20]:+6.1f} %  "
                  f"p95 {100 * v[len(v) * 19 // 20]:+6.1f} %  within 10 %: {ok}/{len(v)}")


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("out_dir")
    p.add_argument("--estimators", default=",".join(MAKERS))
    p.add_argument("--split", action="store_true", help="the time-sliced split's stages per read")
    p.add_argument("--forgers", action="store_true", help="the evidence against forged timelines")
    p.add_argument("--bounds", action="store_true", help="point figures and bounds per read")
    p.add_argument("--margins", action="store_true",
                   help="a sampled draw's bounds widened by the coverage's margin or by their own")
    p.add_argument("--mps-lone", action="store_true",
                   help="MPS clients' lone covered time over their raw estimates, and the figure scaled by it")
    p.add_argument("--lone-scale", action="store_true",
                   help="the time-sliced point rule with and without the lone milliseconds' scale")
    p.add_argument("--local-scale", action="store_true",
                   help="the same, each shared millisecond scaled by the lone milliseconds near it")
    p.add_argument("--deficit", action="store_true",
                   help="each tenant's unexplained share, honest and forged 0.8x / 1.2x")
    a = p.parse_args()
    if a.deficit:
        evaluate_deficit(a.out_dir, a.estimators.split(",")[0])
    elif a.lone_scale or a.local_scale:
        import replay_scale
        replay_scale.evaluate_lone_scale(a.out_dir, a.estimators.split(",")[0], local=a.local_scale)
    elif a.bounds:
        import replay_bounds
        replay_bounds.evaluate_bounds(a.out_dir)
    elif a.margins:
        import replay_bounds
        replay_bounds.evaluate_margins(a.out_dir)
    elif a.mps_lone:
        import replay_mps
        replay_mps.evaluate_mps_lone(a.out_dir)
    elif a.forgers:
        evaluate_forgers(a.out_dir, a.estimators.split(",")[0])
    elif a.split:
        for name in a.estimators.split(","):
            print("==", name)
            evaluate_split(a.out_dir, name)
    else:
        evaluate(a.out_dir, {k: MAKERS[k] for k in a.estimators.split(",")})



def tenant_deficit(lines, lo_ms, hi_ms):
    """Per tenant over [lo_ms, hi_ms): of the milliseconds it covered (every timeline traced),
    the share no tenant's solo parts explain, max covered less the solo parts' sum, weighted by
    that max. A forger that scales its whole timeline down leaves its co-tenants' stretched
    spans less explained, in the milliseconds it shares with them."""
    n = len(lines)
    deficit, weight = [0.0] * n, [0.0] * n
    for b in range(lo_ms, hi_ms):
        if not all(tr(b) for _, tr in lines):
            continue
        cov = [tl[b][0] / BUCKET if b in tl else 0.0 for tl, _ in lines]
        so = [min(tl[b][1] / BUCKET, cov[i]) if b in tl else 0.0 for i, (tl, _) in enumerate(lines)]
        top = max(cov)
        if top <= 0:
            continue
        for i in range(n):
            if cov[i] > 0:
                deficit[i] += max(0.0, top - sum(so))
                weight[i] += top
    return [d / w if w else None for d, w in zip(deficit, weight)]


def evaluate_deficit(out_dir, make_name):
    """For each time-sliced draw whose tenants' logs all came back, per read over the published
    window: each tenant's deficit as it ran, and again with it forged 0.8x and 1.2x as the
    corpus's relay forges (`forged`). A lie that reads past every honest co-tenant's deficit in
    the same read is one a check could catch."""
    make = MAKERS[make_name]
    shown = None
    for d, tens, cached, r, w, lo, hi in published_reads(out_dir, "ts", lambda p: cached_line(p, make)):
        if shown is not d:
            print("==", d["draw"], " ".join(t["kind"] for t in tens))
            shown = d
        lines = [c[:2] for c in cached]
        honest = tenant_deficit(lines, lo, hi)
        lies = []
        for i, c in enumerate(cached):
            for f in (0.8, 1.2):
                fl = list(lines)
                fl[i] = (forged(c[0], f), lines[i][1])
                lies.append(f"{tens[i]['kind']}x{f}:{tenant_deficit(fl, lo, hi)[i]:.3f}")
        print("   honest", " ".join(f"{x:.3f}" if x is not None else "-" for x in honest), "| forged", " ".join(lies))


def traced_in(stretches):
    """Whether millisecond `b` (unix) lies wholly inside one of the traced stretches."""
    starts = [a for a, _ in stretches]

    def traced(b):
        lo = b * BUCKET
        i = bisect.bisect_right(starts, lo) - 1
        return i >= 0 and lo + BUCKET <= stretches[i][1]
    return traced


def cached_line(path, make):
    """A log's timeline, whether each millisecond was traced, and where its records end."""
    tl, st, end = timelines_of(path, make)
    return tl, traced_in(st), end


def published_reads(out_dir, mode, line_of, min_tenants=2):
    """Every read of the run's `mode` draws ("ts", "mps") whose tenants (holders aside, at least
    `min_tenants`) all left a record log, that tessera published a window for (`figure_window`,
    run 17 on) and that the logs cover to its end: (draw, tenants, their lines, read, window,
    first ms, end ms). `line_of(path)` reads a log once (its third item: where its records end)."""
    import glob
    logs = {p.rsplit(".", 1)[-1]: p for p in glob.glob(os.path.join(out_dir, "rec", mode + "-*"))}
    cache = {}
    for line in open_corpus(out_dir):
        d = json.loads(line)
        if d.get("type") != "draw" or d.get("mode") != mode:
            continue
        tens = [t for t in d["tenants"] if t.get("pid") is not None and t["kind"] != "holder"]
        pids = [str(t["pid"]) for t in tens]
        if len(pids) < min_tenants or not all(p in logs for p in pids):
            continue
        for p in pids:
            if p not in cache:
                cache[p] = line_of(logs[p])
        for r in d["reads"]:
            w = next(iter(r["gpu"].values()), {}).get("window")
            if not w:
                continue
            lo, hi = int(w[0] * 1000), int(w[1] * 1000)
            if any(cache[p][2] < hi * BUCKET for p in pids):
                continue
            yield d, tens, [cache[p] for p in pids], r, w, lo, hi


def run_clocks(out_dir):
    """The run's clock band (analyze.py's `Clocks`) from its calibration and footer."""
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import analyze
    recs = [json.loads(line) for line in open_corpus(out_dir)]
    calib = next(d for d in recs if d.get("type") == "calib")["calib"]
    foot = next(d for d in recs if d.get("type") == "footer")
    return analyze.Clocks(foot.get("clocks") or [], calib, 0)


def window_truth(tenant, w):
    """A tenant's kernel-time truth over window `w` from its request log."""
    return sum(k for m, k in tenant.get("reqs") or [] if w[0] <= m < w[1]) / 1000 / (w[1] - w[0])


def timelines_of(path, make):
    """A log's timeline by unix millisecond: {ms: [covered ns, solo ns]}, its traced stretches
    in unix ns, and the end of its records (a log that hit its cap ends early)."""
    ks, stretches, off, shapes = load(path)
    graph_of = {sid: node for sid, (_, node) in shapes.items()}
    tl = timeline([(s + off, e + off, sh, x) for s, e, sh, x in ks], make(graph_of))
    st = [(a + off, min(b + off, ks[-1][1] + off if ks else b)) for a, b in stretches]
    return tl, st, (ks[-1][1] + off) if ks else 0


def split_window(lines, lo_ms, hi_ms):
    """The time-sliced split's stages over [lo_ms, hi_ms) for timelines that all traced it:
    per tenant (covered, solo, own_by_solo, own, exclusive), in ms. `lines`: [(tl, traced)]."""
    n = len(lines)
    out = [[0.0] * 5 for _ in range(n)]
    common = 0
    for b in range(lo_ms, hi_ms):
        if not all(tr(b) for _, tr in lines):
            continue
        common += 1
        cov = [tl[b][0] / BUCKET if b in tl else 0.0 for tl, _ in lines]
        solo = [tl[b][1] / BUCKET if b in tl else 0.0 for tl, _ in lines]
        cs, ss = sum(cov), sum(solo)
        for i in range(n):
            c = cov[i]
            if c <= 0:
                continue
            o = out[i]
            o[0] += c
            o[1] += solo[i]
            if cs - c > 0:
                o[2] += solo[i] / max(ss, 1.0)
                o[3] += c if cs <= 1.0 else solo[i] / max(ss, 1.0)
                o[4] += max(0.0, c - (cs - c))
            else:
                o[2] += c
                o[3] += c
                o[4] += c
    return out, common


def evaluate_split(out_dir, make_name):
    """Each draw's time-sliced split rebuilt from the tenants' record logs with the estimator,
    per read over the timelines' window (2 s behind the read), beside the lagged truth."""
    import glob
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import analyze
    make = MAKERS[make_name]
    logs = {p.rsplit(".", 1)[-1]: p for p in glob.glob(os.path.join(out_dir, "rec", "*"))}
    cache = {}
    res = collections.defaultdict(lambda: collections.defaultdict(list))
    for line in open_corpus(out_dir):
        d = json.loads(line)
        if d.get("type") != "draw" or d.get("mode") == "alone":
            continue
        tens = [t for t in d["tenants"] if t.get("pid") is not None and t["kind"] != "holder"]
        pids = [str(t["pid"]) for t in tens]
        if not all(p in logs for p in pids):
            continue
        for p in pids:
            if p not in cache:
                cache[p] = cached_line(logs[p], make)
        lines = [cache[p][:2] for p in pids]
        for r in d["reads"]:
            t = r["t"]
            hi = int((t - LAG - OFFSET) * 1000)
            lo = hi - int(WINDOW * 1000)
            if any(cache[p][2] < hi * BUCKET for p in pids):
                continue
            out, common = split_window(lines, lo, hi)
            if common < 1000:
                continue
            for ten, o in zip(tens, out):
                if ten.get("liar"):
                    continue
                truth = analyze.read_truth(ten, t, sampled=True)
                if not truth or truth < 0.02:
                    continue
                key = (d["mode"], ten["kind"])
                for name, v in zip(("covered", "solo", "own_by_solo", "own", "exclusive"), o):
                    res[key][name].append((v / common - truth) / truth)
    for key, by in sorted(res.items()):
        print(*key)
        for name, v in by.items():
            v.sort()
            ok = sum(1 for x in v if abs(x) <= 0.10)
            print(f"   {name:12s} n {len(v):4d} median {100 * v[len(v) // 2]:+6.1f} %  p5 {100 * v[len(v) // 20]:+6.1f} %  "
                  f"p95 {100 * v[len(v) * 19 // 20]:+6.1f} %  within 10 %: {ok}/{len(v)}")



def forged(tl, f):
    """What the corpus's forging relay sends for a timeline: covered and solo scaled by `f`,
    covered capped at the millisecond, solo at covered (tenants.py, ForgingRelay)."""
    out = {}
    for b, (c, s) in tl.items():
        c2 = min(BUCKET, round(c * f))
        out[b] = [c2, min(c2, s * f)]
    return out


def evidence(lines, lo_ms, hi_ms):
    """Over [lo_ms, hi_ms), in shares of the milliseconds every timeline traced:
    `unexplained`: Σ_k max(0, max_i c_ik - Σ_i s_ik), kernel time inside someone's span that
    no solo duration explains (switching, and time a tenant ran without claiming it);
    `excess`: Σ_k max(0, Σ_i s_ik - 1), solo durations past the millisecond (time-slicing runs
    one context at a time)."""
    un = ex = 0.0
    common = 0
    for b in range(lo_ms, hi_ms):
        if not all(tr(b) for _, tr in lines):
            continue
        common += 1
        cov = [tl[b][0] / BUCKET if b in tl else 0.0 for tl, _ in lines]
        solo = [tl[b][1] / BUCKET if b in tl else 0.0 for tl, _ in lines]
        ss = sum(solo)
        un += max(0.0, max(cov) - ss)
        ex += max(0.0, ss - 1.0)
    return (un / common, ex / common) if common else (None, None)


def evaluate_forgers(out_dir, make_name, factors=(0.5, 0.8, 1.2, 1.5)):
    """The time-sliced evidence per read for the honest draws as they ran, and again with each
    honest tenant in turn forged by each factor: what a check on `unexplained` or `excess`
    would catch, and what it would falsely dispute."""
    import glob
    make = MAKERS[make_name]
    logs = {p.rsplit(".", 1)[-1]: p for p in glob.glob(os.path.join(out_dir, "rec", "*"))}
    cache = {}
    honest, lies = [], collections.defaultdict(list)
    for line in open_corpus(out_dir):
        d = json.loads(line)
        if d.get("type") != "draw" or d.get("mode") == "alone":
            continue
        tens = [t for t in d["tenants"] if t.get("pid") is not None and t["kind"] != "holder"]
        if any(t.get("liar") for t in tens):
            continue
        pids = [str(t["pid"]) for t in tens]
        if len(pids) < 2 or not all(p in logs for p in pids):
            continue
        for p in pids:
            if p not in cache:
                cache[p] = cached_line(logs[p], make)
        for r in d["reads"]:
            hi = int((r["t"] - LAG - OFFSET) * 1000)
            lo = hi - int(WINDOW * 1000)
            if any(cache[p][2] < hi * BUCKET for p in pids):
                continue
            lines = [cache[p][:2] for p in pids]
            base = evidence(lines, lo, hi)
            if base[0] is None:
                continue
            honest.append(base)
            for i, p in enumerate(pids):
                for f in factors:
                    fl = list(lines)
                    fl[i] = (forged(cache[p][0], f), cache[p][1])
                    lies[f].append(evidence(fl, lo, hi))
    for name, k in (("unexplained", 0), ("excess", 1)):
        h = sorted(x[k] for x in honest)
        print(f"{name}: honest reads {len(h)}: median {h[len(h) // 2]:.3f}, 95th {h[len(h) * 19 // 20]:.3f}, "
              f"98th {h[len(h) * 49 // 50]:.3f}, max {h[-1]:.3f}")
        for f, v in sorted(lies.items()):
            v = sorted(x[k] for x in v)
            for q in (h[len(h) * 49 // 50], h[-1]):
                caught = sum(1 for x in v if x > q)
                print(f"   forged x{f}: {len(v)} reads, median {v[len(v) // 2]:.3f}; past the honest 98th "
                      f"({q:.3f}) in {caught}" if q == h[len(h) * 49 // 50] else
                      f"   forged x{f}: past the honest max ({q:.3f}) in {caught}")


if __name__ == "__main__":
    main()

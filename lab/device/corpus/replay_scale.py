"""The lone milliseconds' scale, replayed (issue 42): the time-sliced point rule with each
tenant's solo parts in a shared millisecond scaled by its covered over its solo time where it
alone covered one. Run through replay.py (`--lone-scale`, `--local-scale`)."""
import bisect
import collections

from replay import BUCKET, MAKERS, cached_line, published_reads, window_truth

# The shipped clamp and the lone time a scale needs (src/model/compute/timeslice.rs).
SCALE_MIN, SCALE_MAX, LONE_MS_MIN = 1.0, 1.5, 50.0
# `--local-scale`: (± ms around a shared millisecond, lone ms needed there, else the window's).
NEAR = [(50, 5), (50, 20), (150, 5), (150, 20), (500, 5), (500, 20)]


def clamp(covered, solo, needed):
    return min(SCALE_MAX, max(SCALE_MIN, covered / solo)) if covered >= needed and solo > 0 else None


def lone_scaled_split(lines, lo_ms, hi_ms, near=None):
    """Per tenant over [lo_ms, hi_ms), in shares of the milliseconds every timeline traced: the
    point rule as it was (`base`), with the window's lone scale (`scaled`, the shipped rule), and
    those scales. `near` = (k, needed): the scale of a shared millisecond is taken from the lone
    milliseconds within k ms of it where they hold `needed` ms of covered time, else the window's:
    whether a window's lone milliseconds hold another batch mix than its shared ones."""
    n = len(lines)
    ms = []
    lone = [[] for _ in range(n)]
    for b in range(lo_ms, hi_ms):
        if not all(tr(b) for _, tr in lines):
            continue
        cov = [tl[b][0] / BUCKET if b in tl else 0.0 for tl, _ in lines]
        so = [min(tl[b][1] / BUCKET, cov[i]) if b in tl else 0.0 for i, (tl, _) in enumerate(lines)]
        ms.append((b, cov, so))
        alone = [i for i in range(n) if cov[i] > 0]
        if len(alone) == 1:
            lone[alone[0]].append((b, cov[alone[0]], so[alone[0]]))
    if not ms:
        return None
    prefix = []
    for i in range(n):
        at, pc, ps = [x[0] for x in lone[i]], [0.0], [0.0]
        for _, c, so in lone[i]:
            pc.append(pc[-1] + c)
            ps.append(ps[-1] + so)
        prefix.append((at, pc, ps))
    window = [clamp(pc[-1], ps[-1], LONE_MS_MIN) or 1.0 for _, pc, ps in prefix]

    def scale(i, b):
        if near is None:
            return window[i]
        at, pc, ps = prefix[i]
        lo, hi = bisect.bisect_left(at, b - near[0]), bisect.bisect_right(at, b + near[0])
        return clamp(pc[hi] - pc[lo], ps[hi] - ps[lo], near[1]) or window[i]

    base, scaled = [0.0] * n, [0.0] * n
    for b, cov, so in ms:
        cs, ss = sum(cov), sum(so)
        adj = [min(cov[i], so[i] * scale(i, b)) if cov[i] > 0 else 0.0 for i in range(n)]
        sa = sum(adj)
        for i in range(n):
            if cov[i] <= 0:
                continue
            if cs - cov[i] > 0 and cs > 1.0:
                base[i] += so[i] / max(ss, 1.0)
                scaled[i] += adj[i] / max(sa, 1.0)
            else:
                base[i] += cov[i]
                scaled[i] += cov[i]
    common = len(ms)
    return [x / common for x in base], [x / common for x in scaled], window


def evaluate_lone_scale(out_dir, make_name, local=False):
    """Each time-sliced draw whose tenants' logs all came back, per read over the window
    tessera published (`figure_window`, run 17 on), by kind: the point rule without and with the
    window's lone scale (and, `local`, with each `NEAR` variant) against the requests' truth over
    that window."""
    make = MAKERS[make_name]
    variants = [("base", None), ("scaled", None)] + ([(f"near {k}/{m}", (k, m)) for k, m in NEAR] if local else [])
    res = collections.defaultdict(lambda: collections.defaultdict(list))
    reads = published_reads(out_dir, "ts", lambda p: cached_line(p, make), min_tenants=1)
    for d, tens, cached, r, w, lo, hi in reads:
        lines = [c[:2] for c in cached]
        got = lone_scaled_split(lines, lo, hi)
        if not got:
            continue
        figures = {"base": got[0], "scaled": got[1]}
        for name, near in variants[2:]:
            figures[name] = lone_scaled_split(lines, lo, hi, near)[1]
        for i, t in enumerate(tens):
            truth = window_truth(t, w)
            if t.get("liar") or truth <= 0:
                continue
            for name, _ in variants:
                res[t["kind"]][name].append((figures[name][i] - truth) / truth)
    for kind, runs in sorted(res.items()):
        for name, _ in variants:
            v = sorted(runs[name])
            ok = sum(1 for x in v if abs(x) <= 0.10)
            print(f"ts {kind:10s} {name:7s} n {len(v):4d} median {100 * v[len(v) // 2]:+6.1f} %  "
                  f"within 10 %: {ok}/{len(v)}")

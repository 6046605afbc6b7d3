"""The MPS side of replay.py (issue 42): whether a client's solo estimates err where it ran
alone, read from its record log. Run through replay.py (`--mps-lone`)."""
import collections

from replay import BUCKET, Band, Context, load, published_reads, run_clocks, spread_span, traced_in, window_truth


class RawBand(Band):
    """The shipped estimate (ctx2-band), keeping each kernel's estimate as it was, uncapped."""

    def count(self, est, d):
        self.last_est = est
        return super().count(est, d)


def raw_line(path):
    """A log's timeline by unix millisecond, {ms: [covered, solo, raw estimate]} in ns, whether
    each millisecond was traced, and where its records end."""
    ks, stretches, off, shapes = load(path)
    graph_of = {sid: node for sid, (_, node) in shapes.items()}
    inner = RawBand()
    est = Context(inner, graph_of, 2)
    tl = collections.defaultdict(lambda: [0, 0.0, 0.0])
    covered_until = 0
    for s, e, shape, _ in ks:
        s, e = s + off, e + off
        d = e - s
        solo = est.solo(shape, d, e)
        raw = getattr(inner, "last_est", d)
        if e <= covered_until or d <= 0:
            continue
        spread_span(tl, max(s, covered_until), e, solo / d, raw / d)
        covered_until = e
    st = [(a + off, min(b + off, ks[-1][1] + off if ks else b)) for a, b in stretches]
    return tl, traced_in(st), (ks[-1][1] + off) if ks else 0


def mps_split(lines, lo_ms, hi_ms, clamp):
    """The MPS point rule over the window (a lone millisecond its coverage, a shared one its
    solo parts), the solo parts scaled by covered over raw estimates where it ran alone, within
    `clamp`; with each tenant's covered share, scale and lone milliseconds."""
    n = len(lines)
    rows, lone_cov, lone_raw = [], [0.0] * n, [0.0] * n
    for b in range(lo_ms, hi_ms):
        if not all(tr(b) for _, tr, _ in lines):
            continue
        cov = [tl[b][0] / BUCKET if b in tl else 0.0 for tl, _, _ in lines]
        solo = [min(tl[b][1] / BUCKET, cov[i]) if b in tl else 0.0 for i, (tl, _, _) in enumerate(lines)]
        on = [i for i in range(n) if cov[i] > 0]
        if len(on) == 1:
            lone_cov[on[0]] += cov[on[0]]
            lone_raw[on[0]] += lines[on[0]][0][b][2] / BUCKET
        rows.append((cov, solo))
    if len(rows) < 1000:
        return None
    scale = [min(clamp[1], max(clamp[0], c / r)) if c >= 50 and r > 0 else 1.0 for c, r in zip(lone_cov, lone_raw)]
    own, covered = [0.0] * n, [0.0] * n
    for cov, solo in rows:
        for i, c in enumerate(cov):
            if c > 0:
                covered[i] += c
                own[i] += min(c, solo[i] * scale[i]) if sum(cov) - c > 0 else c
    m = len(rows)
    return [x / m for x in own], [x / m for x in covered], scale, lone_cov


def fill(shares, spans, device):
    """src/model/compute/probe_split.rs, `fill_to_device`."""
    upper = [max(s, c) for s, c in zip(shares, spans)]
    floor, room = sum(shares), sum(u - s for u, s in zip(upper, shares))
    k = min(1.0, max(0.0, (device - floor) / room)) if device is not None and room > 0 else 0.0
    return [s + (u - s) * k for s, u in zip(shares, upper)]


def evaluate_mps_lone(out_dir, clamps=(("as shipped", (1.0, 1.0)), ("scale <= 1", (0.67, 1.0)),
                                       ("scale 0.67-1.5", (0.67, 1.5)))):
    """MPS draws whose clients' logs all came back, per read over the published window: each
    client's lone covered time over its raw estimates there, and the MPS figure (filled to the
    device's reading over the window) with the solo parts scaled by it, against the truth."""
    clk = run_clocks(out_dir)
    res = collections.defaultdict(lambda: collections.defaultdict(list))
    for d, tens, cached, r, w, lo, hi in published_reads(out_dir, "mps", raw_line):
        g = next(iter(r["gpu"].values()), {})
        for name, clamp in clamps:
            got = mps_split(cached, lo, hi, clamp)
            if not got:
                continue
            figs = fill(got[0], got[1], g.get("device_window", g.get("device")))
            for i, t in enumerate(tens):
                truth = window_truth(t, w)
                if t.get("liar") or truth < 0.02:
                    continue
                band = clk.band(t["kind"], truth, w[0], w[1])
                res[name][t["kind"]].append((truth, band, figs[i], got[2][i], got[3][i]))
    for name, by in res.items():
        by["all"] = [x for v in list(by.values()) for x in v]
        for kind, v in sorted(by.items()):
            rel = sorted((f - t) / t for t, _, f, _, _ in v)
            cal = sum(1 for t, _, f, _, _ in v if abs(f - t) <= 0.1 * t)
            band = sum(1 for _, (bl, bh), f, _, _ in v if 0.9 * bl <= f <= 1.1 * bh)
            print(f"{name:15s} {kind:10s} {len(v):3d} reads, median {100 * rel[len(rel) // 2]:+6.1f} %, within 10 %: "
                  f"{cal} (band {band}); lone scale {sum(x[3] for x in v) / len(v):.3f} over "
                  f"{sum(x[4] for x in v) / len(v):.0f} ms alone")

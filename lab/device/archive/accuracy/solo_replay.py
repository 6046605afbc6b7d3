"""Replays the probe's kernel records (TESSERA_PROBE_RECORD_LOG, as run5.sh writes them) through solo
estimators offline, and through the host's time-sliced split, to see which estimator explains
each tenant's truth (issue 21, run 4).
  solo_replay.py RECORDS_DIR RAW_DIR [--shapes] [--starts STARTS.json]
RECORDS_DIR holds rec.<pid> (the probe's record log) or rec.<case>-<i> (kineto_records.sh); RAW_DIR
<case>-<i>.json per tenant (pid, kind, truth, and start, dur or the case's entry in STARTS).
Per tenant it prints, over the milliseconds of its truth window that every tenant of the case
traced ("common"), as ratios of those milliseconds:
  spans     the union of its kernel spans
  true      Σ of its kernels' true solo durations (the median of the same kernel, found by name
            and launch shape, in the alone cases)
  <rule>    its own time by the host's split (src/model/timeslice.rs) with that rule's solo
            estimates: `probe` (as the probe logged them), then each variant below
and the truth the suite measured (CUDA events around each request, alone).
--shapes also prints, per kind, each shape's alone duration spread (is a shape one kernel?)."""
import bisect, collections, glob, json, math, os, statistics, sys

MS = 1_000_000


def load_records(path):
    """(shapes {id: key}, kernels [(id, start, end, solo, corr)], toggles [(what, ns)],
    clocks [(cupti, unix)])."""
    shapes, kernels, toggles, clocks = {}, [], [], []
    start = corr = 0
    with open(path, errors="replace") as f:
        for line in f:
            p = line.split()
            if not p:
                continue
            if p[0] == "K" and len(p) == 6:
                start += int(p[2])
                corr += int(p[5])
                kernels.append((int(p[1]), start, start + int(p[3]), int(p[4]), corr))
            elif p[0] == "S" and len(p) >= 10:
                shapes[int(p[1])] = (p[9], tuple(int(x) for x in p[2:9]))
            elif p[0] == "R" and len(p) == 3:
                toggles.append((p[1], int(p[2])))
            elif p[0] == "T" and len(p) == 3:
                clocks.append((int(p[1]), int(p[2])))
            elif p[0] == "B" and len(p) == 2:
                # kineto_tenant.py: record time + B is unix time.
                clocks.append((0, -int(p[1])))
    return shapes, kernels, toggles, clocks


def traced_stretches(toggles, end_ns):
    """[(on, off)] of CUPTI time with records on (attach counts as on: RECORDS=always); a
    dump without toggles (kineto_tenant.py with records on throughout) is traced throughout."""
    if not toggles:
        return [(0, end_ns)]
    out, on = [], None
    for what, ns in toggles:
        if what in ("on", "attach") and on is None:
            on = ns
        elif what == "off" and on is not None:
            out.append((on, ns))
            on = None
    if on is not None:
        out.append((on, end_ns))
    return out


# ---- solo estimators: each a class with observe(key, dur, end) -> solo ns ----

class Current:
    """The probe's rule (crates/probe/src/solo.rs): running mean of runs within 15 % of the
    estimate; a run 15 % faster restarts it."""
    name = "current"

    def __init__(self):
        self.best = {}

    def observe(self, key, d, end):
        e = self.best.get(key)
        if e is None or d * 1.15 < e[0] or end - e[1] > 30_000_000_000:
            e = (float(d), end)
        elif d <= e[0] * 1.15:
            e = (e[0] + (d - e[0]) / 16, end)
        self.best[key] = e
        return min(round(e[0]), d)


class Quantile:
    """The q-quantile of the shape's last `n` runs (its own run included)."""

    def __init__(self, q, n=64):
        self.q, self.n, self.runs = q, n, collections.defaultdict(collections.deque)
        self.sorted = collections.defaultdict(list)
        self.name = f"q{int(q * 100)}/{n}"

    def observe(self, key, d, end):
        r, s = self.runs[key], self.sorted[key]
        r.append(d)
        bisect.insort(s, d)
        if len(r) > self.n:
            s.pop(bisect.bisect_left(s, r.popleft()))
        return min(s[min(len(s) - 1, int(self.q * len(s)))], d)


class TrueSolo:
    """The kernel's alone median (what a perfect estimator would give)."""
    name = "true"

    def __init__(self, table):
        self.table = table

    def observe(self, key, d, end):
        t = self.table.get(key)
        return d if t is None else min(t, d)


def replay(kernels, shapes, est):
    keyof = {i: shapes.get(i, ("?", ())) for i in shapes}
    out = []
    for (i, s, e, solo, corr) in kernels:
        out.append(est.observe(keyof.get(i, ("?", (i,))), e - s, e))
    return out


def timeline(kernels, solos, lo, hi):
    """Per millisecond bucket in [lo, hi) ns: (covered ns, solo ns), union of spans as the
    probe folds them (sorted by start; what an earlier span covered is skipped)."""
    n = (hi - lo) // MS
    cov, sol = [0.0] * n, [0.0] * n
    order = sorted(range(len(kernels)), key=lambda k: kernels[k][1])
    covered_until = 0
    for k in order:
        _, s, e, _, _ = kernels[k]
        if e <= covered_until or e <= lo or s >= hi:
            covered_until = max(covered_until, e)
            continue
        f = max(s, covered_until)
        ratio = solos[k] / (e - s)
        covered_until = e
        b0, b1 = max(0, (f - lo) // MS), min(n - 1, (e - 1 - lo) // MS)
        for b in range(b0, b1 + 1):
            a, z = max(f, lo + b * MS), min(e, lo + (b + 1) * MS)
            if z > a:
                cov[b] = min(MS, cov[b] + (z - a))
                sol[b] = min(cov[b], sol[b] + (z - a) * ratio)
    return cov, sol


def split(lines, common):
    """The host's rule (src/model/timeslice.rs) over the common milliseconds: own time each."""
    own = [0.0] * len(lines)
    for k in common:
        cov_sum = sum(l[0][k] for l in lines) / MS
        solo_sum = sum(l[1][k] for l in lines) / MS
        for i, (cov, sol) in enumerate(lines):
            c = cov[k] / MS
            if c <= 0:
                continue
            if cov_sum - c > 0 and cov_sum > 1.0:
                own[i] += (sol[k] / MS) / max(solo_sum, 1.0)
            else:
                own[i] += c
    return own


def split_remainder(lines, common):
    """Variant: in a millisecond whose spans add up past it, the process with the most span
    there is the one stretched over the others' slices; the others keep their spans (up to
    their solo time) and it gets at most what they leave of the millisecond."""
    own = [0.0] * len(lines)
    for k in common:
        cs = [l[0][k] / MS for l in lines]
        ss = [l[1][k] / MS for l in lines]
        if sum(cs) <= 1.0:
            for i, c in enumerate(cs):
                own[i] += c
            continue
        m = max(range(len(cs)), key=lambda i: cs[i])
        rest = sum(c for i, c in enumerate(cs) if i != m)
        if rest > 1.0:
            for i in range(len(cs)):
                own[i] += ss[i] / max(sum(ss), 1.0)
            continue
        for i in range(len(cs)):
            own[i] += min(ss[m], 1.0 - rest) if i == m else min(cs[i], ss[i])
    return own


def main():
    rec_dir, raw_dir = sys.argv[1], sys.argv[2]
    show_shapes = "--shapes" in sys.argv
    # --starts FILE: {case: [unix start, duration s]} for truth files written without them.
    starts = {}
    if "--starts" in sys.argv:
        starts = json.load(open(sys.argv[sys.argv.index("--starts") + 1]))
    tenants = collections.defaultdict(list)
    for f in sorted(glob.glob(os.path.join(raw_dir, "*-[0-9].json"))):
        j = json.load(open(f))
        case, j["index"] = os.path.basename(f)[:-5].rsplit("-", 1)
        if "pid" in j and "start" not in j and case in starts:
            j["start"], j["dur"] = starts[case]
        if "pid" in j and "start" in j:
            tenants[case].append(j)
    data = {}
    for case, ts in tenants.items():
        for i, t in enumerate(ts):
            # rec.<pid> (the probe's dump) or rec.<case>-<i> (kineto_records.sh)
            for p in (os.path.join(rec_dir, f"rec.{t['pid']}"),
                      os.path.join(rec_dir, f"rec.{case}-{t['index']}")):
                if os.path.exists(p):
                    data[t["pid"]] = load_records(p)
                    break
    # True per-kernel solo durations: the alone cases' medians by (name, shape).
    alone = collections.defaultdict(list)
    for case, ts in tenants.items():
        if not case.startswith("alone-"):
            continue
        for t in ts:
            if t["pid"] not in data:
                continue
            shapes, kernels, _, _ = data[t["pid"]]
            for (i, s, e, _, _) in kernels:
                alone[shapes.get(i, ("?", (i,)))].append(e - s)
    table = {k: statistics.median(v) for k, v in alone.items()}
    if show_shapes:
        total = sum(sum(v) for v in alone.values())
        for k, v in sorted(alone.items(), key=lambda kv: -sum(kv[1]))[:40]:
            v = sorted(v)
            q = lambda x: v[min(len(v) - 1, int(x * len(v)))]
            print(f"{k[0][:40]:40} {k[1]} n={len(v)} p5={q(.05)} p50={q(.5)} p95={q(.95)} "
                  f"share={sum(v) / total:.3f}")
    estimators = [Current, lambda: Quantile(0.5), lambda: TrueSolo(table)]
    for case, ts in sorted(tenants.items()):
        ts = [t for t in ts if t["pid"] in data]
        if not ts:
            continue
        # The truth window in the records' clock, by the first tenant's clock pair (the
        # probes share a clock).
        c0, u0 = data[ts[0]["pid"]][3][0]
        lo = c0 + int(ts[0]["start"] * 1e9) - u0
        lo -= lo % MS
        hi = lo + int(ts[0]["dur"] * 1000) * MS
        n = (hi - lo) // MS
        traced = []
        for t in ts:
            st = traced_stretches(data[t["pid"]][2], hi)
            tr = [False] * n
            for on, off in st:
                for b in range(max(0, -(-(on - lo) // MS)), min(n, (off - lo) // MS)):
                    tr[b] = True
            traced.append(tr)
        common = [k for k in range(n) if all(tr[k] for tr in traced)]
        print(f"\n{case}: window {n} ms, common traced {len(common)} ms")
        if not common:
            continue
        rows = collections.OrderedDict()
        logged = any(k[3] for t in ts for k in data[t["pid"]][1])
        for make in ([None] if logged else []) + estimators:
            lines, label = [], "probe"
            for t in ts:
                shapes, kernels, _, _ = data[t["pid"]]
                if make is None:
                    solos = [k[3] for k in kernels]
                else:
                    est = make()
                    label = est.name
                    solos = replay(kernels, shapes, est)
                sel = [j for j, k in enumerate(kernels) if k[2] > lo and k[1] < hi]
                lines.append(timeline([kernels[j] for j in sel], [solos[j] for j in sel], lo, hi))
            per = lambda v: [x / len(common) for x in v]
            if not rows:
                rows["spans"] = per([sum(l[0][k] for k in common) / MS for l in lines])
                # Of each tenant's covered common ms: shared with another tenant ("contended"),
                # and where the tenants' spans add up past the millisecond ("over1").
                for name, test in (("contended", lambda k, i: any(
                        l[0][k] > 0 for j, l in enumerate(lines) if j != i)),
                                   ("over1", lambda k, i: sum(l[0][k] for l in lines) > MS)):
                    rows[name] = []
                    for i, l in enumerate(lines):
                        cov = [k for k in common if l[0][k] > 0]
                        rows[name].append(sum(1 for k in cov if test(k, i)) / max(1, len(cov)))
                # The host's mark (ProbeStages::holds_others): of its covered time, the part in
                # milliseconds it covered whole (0.99) while another tenant's kernels ran in
                # them. At 0.10 or more its share is withheld.
                rows["holds"] = []
                for i, l in enumerate(lines):
                    cov = sum(l[0][k] for k in common)
                    held = sum(l[0][k] for k in common if l[0][k] >= 0.99 * MS and any(
                        o[0][k] > 0 for j, o in enumerate(lines) if j != i))
                    rows["holds"].append(held / cov if cov else 0.0)
            rows[f"{label}:solo"] = per([sum(l[1][k] for k in common) / MS for l in lines])
            rows[f"{label}:split"] = per(split(lines, common))
            rows[f"{label}:remainder"] = per(split_remainder(lines, common))
        for t in ts:
            # The shape holding most of the tenant's kernel time: its runs here against alone,
            # and what the probe's estimator made of it by the end.
            shapes, kernels, _, _ = data[t["pid"]]
            by = collections.defaultdict(list)
            for (i, s0, e0, _, _) in kernels:
                by[i].append(e0 - s0)
            top, durs = max(by.items(), key=lambda kv: sum(kv[1]))
            key = shapes.get(top, ("?", (top,)))
            est = Current()
            for d0 in durs:
                last = est.observe(key, d0, 0)
            durs.sort()
            alone_ms = table.get(key)
            print(f"  pid {t['pid']} ({t['kind']}): top shape {len(durs)} runs, "
                  f"{durs[0] / 1e6:.3f}–{durs[-1] / 1e6:.3f} ms (median "
                  f"{durs[len(durs) // 2] / 1e6:.3f}); alone median "
                  f"{'—' if alone_ms is None else f'{alone_ms / 1e6:.3f}'} ms; current "
                  f"estimate at the end {est.best[key][0] / 1e6:.3f} ms")
        print("  " + f"{'tenant':16} {'truth':>6} " + " ".join(f"{r:>15}" for r in rows))
        for i, t in enumerate(ts):
            print("  " + f"{t['kind'] + ' ' + str(t.get('util')):16} {t['truth']:6.3f} "
                  + " ".join(f"{rows[r][i]:15.3f}" for r in rows))


if __name__ == "__main__":
    main()

"""Exact mode's honesty, measured as an alarm is (issue 32), per draw and in total.

  analyze.py corpus.jsonl [more.jsonl ...]          the corpus (driver.py; .jsonl.xz read too)
  analyze.py --suite lab/data/...run5-a.jsonl ...  the earlier suite's records (suite.sh): one
                                                    averaged figure per tenant and case, so each
                                                    read counts that average (marked "case mean")

Per honest tenant-read (a tenant that carries the real probe, on the GPU the draw runs on):
  coverage   a point figure was published (gpu_process_busy_ratio)
  accurate   of those, within max(3 points, 10 % of truth) of the kernel-time truth (not for
             kinds without one: NO_TRUTH); in heavy draws within 10 %, of tenants whose truth
             is at least 0.1 (issue 42), the memory holder counted apart as idle or not
  bounds     reads with gpu_process_busy_ratio_lower/_upper; `contain`: lower - 0.01 <= truth
             <= upper + 0.01 (0.01: the gauge's rounding and the truth window's edges)
             `width`: the bounds' mean upper - lower; `contain (sampled)`: reads whose probe
             traced in duty cycles (runs 9 on record it), whose bounds carry the sample's margin
Truth per read: where the tenants logged their requests (`reqs`, runs 4 on), the solo kernel
ms of the requests whose middle fell in the read's window [t - 5.5 s, t - 0.5 s] (tessera's
5-s activity window, read up to a second after its sample), over 5 s; for a probe that traced
in duty cycles, whose figure is read from the timelines, that window 2 s earlier (the
timelines' lag, src/source/probe); earlier runs: the draw's mean. `contain (draw mean)` keeps
the old judgement beside it.
  false disp honest reads on a disputed split (`disputed`), and reads with neither a figure nor
             bounds (`withheld`); a disputed split in a draw with a lying probe on the device
             counts apart (`disputed beside a liar`): there the alarm is right
Per lying-probe read (under-claim, over-claim, silent): `caught` = the split was disputed;
`charged` = the liar got a point figure anyway. Honest reads whose point figure was withheld
for bounds (a stretch short of a dispute, `bounds_only` on /debug/attribution) count in
`bounds-only`, not as disputes.
Targets (issue 32): coverage >= 90 %, accurate >= 95 %, bounds contain >= 95 %, false disputes
<= 2 %, caught >= 95 %, MPS within 3 points."""
import argparse
import json
import lzma
import os
import sys
from collections import defaultdict

SLACK = 0.01
LONG_KINDS = ("gemm16k", "prefill", "conv-big")


def open_text(path):
    """A corpus or suite file, plain or xz-compressed (lab/data keeps them as `.jsonl.xz`); a
    plain path that is missing is read from its `.xz` beside it."""
    if not path.endswith(".xz") and not os.path.exists(path) and os.path.exists(path + ".xz"):
        path += ".xz"
    return lzma.open(path, "rt") if path.endswith(".xz") else open(path)

# How far each liar's claim is from its truth, as a multiple of the truth (tenants.py, Liar).
LIE = {"under": 0.75, "over": 1.0, "silent": 1.0,
       # Issue 42's forgers: the real probe's frames scaled, so the lie is (factor - 1) x truth.
       "forge-over20": 0.2, "forge-under20": 0.2, "forge-over50": 0.5, "forge-under50": 0.5}
MATERIAL = 0.03
# A probe that traced this much of the window traced all of it (src/model/compute).
FULLY_TRACED = 0.98
WINDOW, OFFSET = 5.0, 0.5
# A sampled figure is read from the probes' timelines, which end this far behind the probe's
# clock (src/source/probe/mod.rs, TIMELINE_LAG).
TIMELINE_LAG = 2.0
# Kinds whose calibrated truth is not a kernel-time truth: a DDP rank's NCCL kernels wait for
# its peer, so their spans alone depend on the peer's timing (run 4: rank 0 calibrated 5.4 ms
# a step, rank 1 2.8 ms, for the same step). Their reads count for coverage and disputes, not
# for accuracy or bounds; docs/validation.md sets them beside NVML's bookings.
NO_TRUTH = {"ddp"}
# Issue 42: heavy draws judge accuracy on tenants whose truth is at least this.
HEAVY_JUDGED = 0.1


def truth_window(t, sampled=False, published=None):
    """The unix seconds a read's figure covers: as tessera published it (`figure_window`, run
    17 on), else guessed from the read's time, the sample up to a second before it and the
    timelines' lag (runs 4-16: the guess was off by up to a second, which read a bursty
    tenant's figures 20 % from its truth, run 16)."""
    if published and published[1] > published[0]:
        return published[0], published[1]
    offset = OFFSET + (TIMELINE_LAG if sampled else 0.0)
    return t - WINDOW - offset, t - offset


def read_truth(ten, t, key="reqs", sampled=False, published=None):
    """The tenant's kernel-time truth over the read's window, or its draw mean without a log."""
    reqs = ten.get(key)
    if reqs is None:
        return ten.get("truth")
    lo, hi = truth_window(t, sampled, published)
    return sum(k for m, k in reqs if lo <= m < hi) / 1000 / (hi - lo)


def accurate(fig, truth, heavy=False):
    """Runs 1-11's target: within 3 points or 10 %. Issue 42's heavy draws: within 10 % relative
    of the truth, no floor (truths of at least 0.1)."""
    if heavy:
        return abs(fig - truth) <= 0.10 * truth
    return abs(fig - truth) <= max(0.03, 0.10 * truth)


class Clocks:
    """The run's SM clock (footer `clocks`, runs 13 on): each kind's clock while it was
    calibrated, and the clock over a read's window. A compute-bound kernel's time scales with
    the inverse of the clock, a memory-bound one's less: the truth lies between the calibrated
    figure and the calibrated figure times calibration clock / serving clock (issue 42, "check
    the truth": run 12's heavy draws served at 1695-1980 MHz, calibrated at 1935)."""

    def __init__(self, rows, calib, gpu):
        self.rows = sorted((r[0], r[2]) for r in rows if gpu is None or r[1] == gpu)
        self.calib = {}
        for name, c in (calib or {}).items():
            lo, hi = (c.get("measured") or [None, None])
            w = [mhz for t, mhz in self.rows if lo is not None and lo <= t <= hi]
            if not w and lo is not None and self.rows:
                # A calibration shorter than the sampler's 0.5 s can hold no sample (run 23's
                # mlp-train took 0.24 s): its band fell back to the calibrated point. The sample
                # nearest its middle, if within a second, is its clock.
                mid = (lo + hi) / 2
                t, mhz = min(self.rows, key=lambda r: abs(r[0] - mid))
                w = [mhz] if abs(t - mid) <= 1.0 else []
            if w:
                self.calib[c["kind"]] = sorted(w)[len(w) // 2]

    def band(self, kind, truth, lo, hi):
        """(low, high) of the truth over [lo, hi]: the calibrated figure and the clock-scaled one."""
        w = [mhz for t, mhz in self.rows if lo <= t < hi]
        c = self.calib.get(kind)
        if truth is None or not w or not c:
            return truth, truth
        f = c / (sum(w) / len(w))
        return min(truth, truth * f), max(truth, truth * f)


def accurate_band(fig, lo, hi, heavy):
    """Within the target of some truth in the band."""
    if heavy:
        return 0.9 * lo <= fig <= 1.1 * hi
    return min(lo - 0.03, 0.9 * lo) <= fig <= max(hi + 0.03, 1.1 * hi)


def delivered(ten):
    """Realized truth over asked duty: below 0.8 the harness did not deliver the draw it asked for
    (issue 42). Only meaningful where the draw asked in kernel time."""
    d, t = ten.get("duty"), ten.get("truth")
    return None if not d or t is None else t / d


class Tally:
    def __init__(self):
        self.c = defaultdict(int)
        self.err = []
        self.rel = []
        self.width = []
        # (tessera's figure, NVML's per-process figure, truth band low, high), on the same reads.
        self.nvml = []
        # The same, each a tenant's means over a draw's reads.
        self.nvml_cases = []

    def add(self, other):
        for k, v in other.c.items():
            self.c[k] += v
        self.err += other.err
        self.rel += other.rel
        self.width += other.width
        self.nvml += other.nvml
        self.nvml_cases += other.nvml_cases

    def row(self):
        c = self.c
        pct = lambda a, b: f"{100 * a / b:.0f} % ({a}/{b})" if b else "—"
        return {"coverage": pct(c["point"], c["honest"]), "accurate": pct(c["accurate"], c["judged"]),
                "accurate_band": pct(c["accurate_band"], c["judged"]),
                "contain_band": pct(c["contain_band"], c["bounds_judged"]),
                "bounds": pct(c["bounds"], c["honest"]), "contain": pct(c["contain"], c["bounds_judged"]),
                "contain_mean": pct(c["contain_mean"], c["bounds_judged"]),
                "contain_sampled": pct(c["contain_sampled"], c["sampled_judged"]),
                "width": "—" if not self.width else f"{sum(self.width) / len(self.width):.3f}",
                "disputed": pct(c["disputed"], c["honest"]), "withheld": pct(c["withheld"], c["honest"]),
                "beside_liar": pct(c["beside_liar"], c["honest"]),
                "bounds_only": pct(c["bounds_only"], c["honest"]),
                "caught": pct(c["caught"], c["liar"]), "charged": pct(c["charged"], c["liar"]),
                "material": pct(c["material"], c["liar"]), "caught_material": pct(c["caught_material"], c["material"]),
                "short": pct(c["short_delivered"], c["tenants_asked"])}


def corpus_draws(paths):
    for path in paths:
        header = None
        calib, rows = None, []
        with open_text(path) as f:
            for line in f:
                rec = json.loads(line)
                if rec.get("type") == "calib":
                    calib = rec["calib"]
                elif rec.get("type") == "footer":
                    rows = rec.get("clocks") or []
        clocks = None
        with open_text(path) as f:
            for line in f:
                rec = json.loads(line)
                if rec.get("type") == "header":
                    header = rec
                    clocks = Clocks(rows, calib, rec.get("gpu") if rec.get("gpu") is not None else 0) if rows else None
                    print(f"# {path}: seed {rec['seed']}, commit {rec['commit']}, card {rec.get('card')!r}")
                elif rec.get("type") == "footer":
                    print(f"# draws run: ts {rec['ts_draws_run']}, mps {rec['mps_draws_run']}; "
                          f"planned, not run: {len(rec['planned_not_run'])}; wall {rec['wall_s']} s")
                    for fl in rec["failures"]:
                        print("# failure:", json.dumps({k: v for k, v in fl.items() if k != "log"}))
                elif rec.get("type") == "draw":
                    rec["_clocks"] = clocks
                    rec["_timeline_window"] = (header or {}).get("timeline_window_figures", False)
                    yield header, rec


def tally_draw(d):
    """One corpus draw: per tenant, its reads classified; returns (Tally, per-tenant rows)."""
    t = Tally()
    rows = []
    reads = [r for r in d["reads"] if "p" in r]
    # A split disputed where a lying probe shares the device is the alarm working: counted
    # apart (`beside a liar`), not as a false dispute of its honest co-tenants.
    liar_here = any(t.get("liar") and t.get("pid") is not None for t in d["tenants"])
    # Issue 54's long-kernel class is judged as the heavy one is.
    heavy = d.get("class") in ("heavy", "long")
    for ten in d["tenants"]:
        pid, truth = str(ten.get("pid")), ten.get("truth")
        row = {"slot": ten["slot"], "kind": ten["kind"], "liar": ten.get("liar"), "duty": ten["duty"],
               "truth": truth, "error": ten.get("error"), "figs": [], "lo": [], "hi": [], "methods": defaultdict(int),
               "heavy": heavy, "delivered": delivered(ten) if d.get("rate_by") == "kernel" else None}
        if row["delivered"] is not None and ten["kind"] != "holder" and not ten.get("liar"):
            t.c["tenants_asked"] += 1
            t.c["short_delivered"] += row["delivered"] < 0.8
        if ten.get("pid") is None or (truth is None and not ten.get("liar")):
            rows.append(row)
            continue
        before = len(t.nvml)
        for r in reads:
            v = r["p"].get(pid, [None] * 4)
            gpu = next((g for g in r["gpu"].values() if int(pid) in g.get("candidates", []) + g.get("quiet", [])), None)
            raw = (gpu or {}).get("procs", {}).get(pid) or []
            traced = raw[3] if len(raw) > 3 else None
            sampled = traced is not None and traced < FULLY_TRACED
            # From run 13 on, every figure a timeline split gives is read over the timelines'
            # window (issue 42), as a sampled probe's was before.
            lagged = sampled or (d.get("_timeline_window") and bool((gpu or {}).get("from_timelines")))
            published = (gpu or {}).get("window")
            mean_truth, truth = ten.get("truth"), read_truth(ten, r["t"], sampled=lagged, published=published)
            method = gpu["method"] if gpu else "absent"
            row["methods"][method] += 1
            fig, lo, hi = v[0], v[1], v[2]
            clocks = d.get("_clocks")
            wlo, whi = truth_window(r["t"], lagged, published)
            band = clocks.band(ten["kind"], truth, wlo, whi) if clocks and truth is not None else (truth, truth)
            if ten.get("liar"):
                t.c["liar"] += 1
                t.c["caught"] += method == "disputed"
                t.c["charged"] += fig is not None
                material = truth is not None and LIE.get(ten["liar"], 1.0) * truth >= MATERIAL
                t.c["material"] += material
                t.c["caught_material"] += material and method == "disputed"
                continue
            t.c["honest"] += 1
            judged = ten["kind"] not in NO_TRUTH
            # Issue 42's accuracy target is for tenants whose truth is at least 0.1: a memory
            # holder's 0.000 counts as an idle read, not as an accurate figure.
            judged_accuracy = judged and (not heavy or (mean_truth or 0.0) >= HEAVY_JUDGED)
            if heavy and ten["kind"] == "holder" and fig is not None:
                t.c["holder_reads"] += 1
                t.c["holder_idle"] += fig == 0.0
            if fig is not None:
                t.c["point"] += 1
                row["figs"].append(fig)
                if judged_accuracy:
                    t.c["judged"] += 1
                    t.c["accurate"] += accurate(fig, truth, heavy)
                    t.c["accurate_band"] += accurate_band(fig, band[0], band[1], heavy)
                    t.err.append(fig - truth)
                    if truth > 0.0:
                        t.rel.append((fig - truth) / truth)
                    # What a per-process NVML exporter (dcgm-exporter's per-pod mode) would
                    # publish for the same read: NVML books MPS clients' kernels to the server,
                    # so under MPS a client NVML lists without a figure reads 0 there.
                    nvml = raw[0] if raw else None
                    if nvml is None and d.get("mode") == "mps" and raw:
                        nvml = 0.0
                    if nvml is not None:
                        t.nvml.append((fig, nvml, band[0], band[1]))
            if lo is not None and hi is not None:
                t.c["bounds"] += 1
                row["lo"].append(lo)
                row["hi"].append(hi)
                if judged:
                    held = lo - SLACK <= truth <= hi + SLACK
                    t.c["bounds_judged"] += 1
                    t.c["contain"] += held
                    t.c["contain_band"] += lo - SLACK <= band[1] and band[0] <= hi + SLACK
                    t.c["contain_mean"] += lo - SLACK <= mean_truth <= hi + SLACK
                    t.c["sampled_judged"] += sampled
                    t.c["contain_sampled"] += sampled and held
                    t.width.append(hi - lo)
            if gpu and gpu.get("bounds_only") is not None:
                t.c["bounds_only"] += 1
            if method == "disputed" and liar_here:
                t.c["beside_liar"] += 1
            elif method == "disputed":
                t.c["disputed"] += 1
            elif fig is None and lo is None:
                t.c["withheld"] += 1
        mine = t.nvml[before:]
        if mine:
            t.nvml_cases.append(tuple(sum(p[i] for p in mine) / len(mine) for i in range(4)))
        rows.append(row)
    return t, rows


def mean(v):
    return sum(v) / len(v) if v else None


def fmt(v):
    return "—" if v is None else f"{v:.3f}"


def alone_row(d):
    """Issue 42's truth check: a kind alone, records on. The calibrated truth (requests served x
    their kernel ms alone at calibration), the probe's own kernel time over the same reads (its
    busy seconds' rise), and NVML's figure (what tessera publishes for a process alone)."""
    ten = d["tenants"][0]
    pid = str(ten.get("pid"))
    reads = [r for r in d["reads"] if "p" in r]
    nvml = [r["p"].get(pid, [None])[0] for r in reads]
    nvml = [v for v in nvml if v is not None]
    busy, traced = [], []
    for r in reads:
        for g in r["gpu"].values():
            raw = g.get("procs", {}).get(pid)
            if raw and raw[1] is not None:
                busy.append((r["t"], raw[1]))
                if len(raw) > 3 and raw[3] is not None:
                    traced.append(raw[3])
    probe = (busy[-1][1] - busy[0][1]) / (busy[-1][0] - busy[0][0]) if len(busy) > 1 and busy[-1][0] > busy[0][0] else None
    if probe is not None and traced:
        # A probe tracing in duty cycles adds busy time only while it traces.
        probe /= max(sum(traced) / len(traced), 1e-9)
    truth = None
    if busy and ten.get("reqs") is not None and len(busy) > 1:
        lo, hi = busy[0][0] - OFFSET, busy[-1][0] - OFFSET
        truth = sum(k for m, k in ten["reqs"] if lo <= m < hi) / 1000 / (hi - lo)
    print(f"| {ten['kind']} | {ten['duty']} | {fmt(ten.get('truth'))} | {fmt(truth)} | {fmt(probe)} | {fmt(mean(nvml))} "
          f"| {fmt(None if probe is None or not truth else probe / truth)} | {fmt(None if not nvml or not truth else mean(nvml) / truth)} |")


def corpus(paths):
    total, by_mode = Tally(), defaultdict(Tally)
    draws = list(corpus_draws(paths))
    alone = [d for _, d in draws if d.get("mode") == "alone"]
    if alone:
        print("Alone, records on (issue 42's truth check): calibrated truth over the draw and over the reads' span, "
              "the probe's kernel time over the same span, NVML's figure (mean of reads)")
        print()
        print("| kind | asked | truth (draw) | truth (reads) | probe | NVML | probe / truth | NVML / truth |")
        print("|---|---|---|---|---|---|---|---|")
        for d in alone:
            alone_row(d)
        print()
    print("| draw | tenant | duty | truth | delivered | figure (mean) | lower / upper (mean) | reads: methods | verdict |")
    print("|---|---|---|---|---|---|---|---|---|")
    for _, d in draws:
        if d.get("mode") == "alone":
            continue
        t, rows = tally_draw(d)
        total.add(t)
        group = f"{d.get('class', 'light')} {d['mode']}"
        by_mode[group].add(t)
        if not any(x.get("liar") for x in d["tenants"]):
            by_mode[group + ", draws without a liar"].add(t)
        # Issue 54: the long-kernel tenants on their own, and each kind apart.
        if any(x["kind"] in LONG_KINDS for x in d["tenants"]):
            lt, _ = tally_draw({**d, "tenants": [x for x in d["tenants"] if x["kind"] in LONG_KINDS]})
            by_mode[f"{group}, long-kernel tenants"].add(lt)
            for x in d["tenants"]:
                kt, _ = tally_draw({**d, "tenants": [x]})
                by_mode[f"{group}, {x['kind']}"].add(kt)
        for i, r in enumerate(rows):
            name = r["kind"] + (f" (liar: {r['liar']})" if r["liar"] else "")
            fig = mean(r["figs"])
            verdict = r["error"] or ("" if fig is None or r["truth"] is None else
                                     "not judged (no kernel truth)" if r["kind"] in NO_TRUTH else
                                     ("within" if accurate(fig, r["truth"], r["heavy"]) else
                                      f"{100 * (fig - r['truth']):+.1f} pts ({100 * (fig - r['truth']) / max(r['truth'], 1e-9):+.0f} %)"))
            print(f"| {d['draw'] if i == 0 else ''} | {name} | {r['duty']} | {fmt(r['truth'])} | {fmt(r['delivered'])} "
                  f"| {fmt(fig)} | {fmt(mean(r['lo']))} / {fmt(mean(r['hi']))} | "
                  f"{', '.join(f'{k} {v}' for k, v in sorted(r['methods'].items()))} | {verdict} |")
        r = t.row()
        print(f"|  | *draw* | | | coverage {r['coverage']} | contain {r['contain']} | disputed {r['disputed']}, "
              f"withheld {r['withheld']} | accurate {r['accurate']}; liars caught {r['caught']} |")
    summary(total, by_mode)


def suite(paths):
    """The earlier suite's records: a figure per tenant and case (the mean of its reads)."""
    total, by_mode = Tally(), defaultdict(Tally)
    print("| case | tenant | truth | figure (case mean) | reads with a figure / reads | disputed reads |")
    print("|---|---|---|---|---|---|")
    for path in paths:
        with open_text(path) as f:
            for line in f:
                c = json.loads(line)
                t = Tally()
                reads = c.get("probe_reads") or 0
                disputed = (c.get("probe_methods") or {}).get("disputed", 0)
                for i, p in enumerate(c["procs"]):
                    if p["kind"] == "train":  # its truth is not valid (docs/validation.md)
                        continue
                    n, fig, truth = p.get("probe_reads") or 0, p.get("probe_share"), p["truth"]
                    if p["kind"] == "holder" and fig is None and p.get("probe_idle"):
                        fig, n = 0.0, round(p["probe_idle"] * reads)
                    t.c["honest"] += reads
                    t.c["point"] += n
                    t.c["disputed"] += disputed
                    t.c["withheld"] += max(0, reads - n - disputed)
                    if fig is not None:
                        t.c["accurate"] += n if accurate(fig, truth) else 0
                        t.err += [fig - truth] * n
                    print(f"| {c['case'] if i == 0 else ''} | {p['kind']} {p.get('util') or ''} | {truth:.3f} "
                          f"| {fmt(fig)} | {n} / {reads} | {disputed} |")
                total.add(t)
                by_mode["mps" if c["case"].startswith("mps") else "ts"].add(t)
    summary(total, by_mode)


def summary(total, by_mode):
    print()
    print("| | coverage | accurate | accurate (truth band) | bounds published | bounds contain | contain (truth band) | contain (draw mean) | contain (sampled) | width | bounds only | disputed | disputed beside a liar | withheld | liars caught | liars charged | liar reads with a material lie | of those caught | tenants delivering < 0.8 of asked |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    for name, t in [("all", total)] + sorted(by_mode.items()):
        r = t.row()
        print(f"| {name} | {r['coverage']} | {r['accurate']} | {r['accurate_band']} | {r['bounds']} | {r['contain']} | {r['contain_band']} | {r['contain_mean']} | {r['contain_sampled']} | {r['width']} | {r['bounds_only']} | {r['disputed']} | {r['beside_liar']} "
              f"| {r['withheld']} | {r['caught']} | {r['charged']} | {r['material']} | {r['caught_material']} | {r['short']} |")
    for name, t in sorted(by_mode.items()):
        if t.err:
            e = sorted(t.err)
            print(f"{name}: figure - truth over {len(e)} reads: median {100 * e[len(e) // 2]:+.1f} pts, "
                  f"5th {100 * e[len(e) // 20]:+.1f}, 95th {100 * e[(len(e) * 19) // 20]:+.1f}")
        if t.rel:
            e = sorted(t.rel)
            print(f"{name}: relative error over {len(e)} reads: median {100 * e[len(e) // 2]:+.1f} %, "
                  f"5th {100 * e[len(e) // 20]:+.1f} %, 95th {100 * e[(len(e) * 19) // 20]:+.1f} %")
        if t.c["holder_reads"]:
            print(f"{name}: memory holder idle (0.000) in {t.c['holder_idle']} of {t.c['holder_reads']} published reads")
    nvml_beside(by_mode)


def band_error(fig, lo, hi):
    """Relative distance of a figure from the truth band: 0 inside it, else to its nearer edge."""
    if fig < lo:
        return (fig - lo) / lo if lo > 0 else 0.0
    if fig > hi:
        return (fig - hi) / hi if hi > 0 else 0.0
    return 0.0


def nvml_beside(by_mode):
    """NVML's per-process figure against tessera's, on the reads where tessera published one."""
    rows = [(n, t) for n, t in sorted(by_mode.items()) if t.nvml and not n.startswith("light")
            and n.split(",", 1)[1:] in ([], [" draws without a liar"])]
    if not rows:
        return
    print()
    print("NVML's per-process SM utilization beside tessera's figure on the same reads of heavy draws (truth >= 0.1; "
          "an MPS client NVML gives no figure counts 0, as a per-process exporter publishes it): within 10 % of the "
          "truth band, and the median |relative distance| from it; per read, and per tenant (its means over a draw)")
    print()
    print("| | reads | tessera within 10 % | NVML within 10 % | tessera median | NVML median "
          "| tenants | tessera within 10 % | NVML within 10 % | tessera median | NVML median |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")

    def cells(pairs):
        k = len(pairs)
        ok_t = sum(accurate_band(f, lo, hi, True) for f, _, lo, hi in pairs)
        ok_n = sum(accurate_band(n, lo, hi, True) for _, n, lo, hi in pairs)
        et = sorted(abs(band_error(f, lo, hi)) for f, _, lo, hi in pairs)
        en = sorted(abs(band_error(n, lo, hi)) for _, n, lo, hi in pairs)
        return (f"{k} | {ok_t} ({100 * ok_t / k:.0f} %) | {ok_n} ({100 * ok_n / k:.0f} %) "
                f"| {100 * et[k // 2]:.1f} % | {100 * en[k // 2]:.1f} %")
    for name, t in rows:
        print(f"| {name} | {cells(t.nvml)} | {cells(t.nvml_cases)} |")


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("files", nargs="+")
    p.add_argument("--suite", action="store_true", help="the files are suite.sh's suite.jsonl records")
    a = p.parse_args()
    try:
        suite(a.files) if a.suite else corpus(a.files)
    except (OSError, ValueError, KeyError) as e:
        sys.exit(f"analyze.py: {type(e).__name__}: {e}")


if __name__ == "__main__":
    main()

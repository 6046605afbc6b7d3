"""The overhead phase's plan and its reading (profiler.py runs it; no torch here).

The launch-bound loop has drifted between two plain turns by more than the probe's change in
one turn, so one turn each bounds nothing. The phase runs OVERHEAD_ROUNDS rounds; each round is one turn of the loop
without the probe ("plain") and one with the probe as shipped ("probe"), plain first in even
rounds and probe first in odd ones (ABBA across rounds), so a linear drift adds to the probe's
change in one round what it takes from it in the next. With OVERHEAD_TRACED=1 a third turn,
the probe tracing every launch (TESSERA_PROBE_OVERHEAD=1), follows in even rounds and leads in
odd ones. One GEMM stream at duty 0.35 runs through all the rounds, unchanged between turns.

Env: OVERHEAD_ROUNDS (6), OVERHEAD_TURN_S (8 s a turn), OVERHEAD_TRACED (0). A turn's steps
count from 2 s in (the previous turn's process is still ending, this one's first steps run) to
1 s before the next turn (its process stops then, so its exit falls in the next one's first 2 s).
The drift control: plain turns against each other, between adjacent rounds; the median change
is read as the probe's cost only when it lies outside that."""
import os
import re
import statistics

SCALE = float(os.environ.get("PROFILER_DRY_SCALE", "1"))
ROUNDS = int(os.environ.get("OVERHEAD_ROUNDS", "6"))
TURN_S = float(os.environ.get("OVERHEAD_TURN_S", "8")) * SCALE
TRACED = os.environ.get("OVERHEAD_TRACED", "0") == "1"
TURN_FROM = 2.0 * SCALE
TURN_GAP = 1.0 * SCALE  # a turn's process ends this long before the next one's turn
DUTY = 0.35
LAUNCHES_PER_STEP = 1000  # the "tiny" workload's step in profiler.py
GEMM = "gemm-ovh"
# variant -> (with the probe, extra env)
VARIANTS = {"plain": (False, {}), "probe": (True, {}), "traced": (True, {"TESSERA_PROBE_OVERHEAD": "1"})}


def check_settings():
    if ROUNDS < 1 or TURN_S <= TURN_FROM + TURN_GAP:
        raise SystemExit(f"overhead: needs OVERHEAD_ROUNDS >= 1 (got {ROUNDS}) and OVERHEAD_TURN_S above "
                         f"{(TURN_FROM + TURN_GAP) / SCALE:g} s (got {TURN_S / SCALE:g})")


def schedule(rounds, traced):
    """The turns in the order they run, each with its offset from the phase's start."""
    base = ["plain", "probe"] + (["traced"] if traced else [])
    turns = []
    for i in range(rounds):
        for v in (base if i % 2 == 0 else base[::-1]):
            turns.append({"name": f"tiny-r{i}-{v}", "round": i, "variant": v, "offset": len(turns) * TURN_S})
    return turns


def planned_order(i, variants):
    base = [v for v in ("plain", "probe", "traced") if v in variants]
    return base if i % 2 == 0 else base[::-1]


def kernels_counted(reads, pid):
    """How much the probe's kernel counter for `pid` grew over the reads (None: fewer than two
    reads with its series, as for a process without the probe)."""
    ks = [r["p"].get(str(pid), {}).get("kernels") for r in reads if "p" in r]
    ks = [k for k in ks if k is not None]
    return ks[-1] - ks[0] if len(ks) > 1 else None


def turn_row(rec, turn):
    """One turn: its loop's launches per second and median µs per launch over the counted part,
    the GEMM stream's steps per second and duty over the same span, the probe's kernel count."""
    row = dict(turn)
    r = rec["tenants"].get(turn["name"], {})
    if not r.get("done"):
        row["error"] = r.get("error", "no steps")
        return row
    lps = rec.get("launches_per_step", LAUNCHES_PER_STEP)
    lo, hi = r["start"] + rec["from"], r["start"] + rec["turn_s"] - rec["gap"]
    done = [t for t in r["done"] if lo < t <= hi]
    steps = [b - a for a, b in zip(done, done[1:])]
    row["first"] = r["done"][0]  # when it ran, measured, for the order check
    row["launches_per_s"] = len(steps) * lps / (done[-1] - done[0]) if steps else None
    row["us_per_launch"] = statistics.median(steps) / lps * 1e6 if steps else None
    g = rec["tenants"].get(GEMM, {})
    km = rec.get("calib", {}).get("gemm", {}).get("kernel_ms")
    row["gemm_steps_per_s"] = sum(1 for t in g["done"] if lo < t <= hi) / (hi - lo) if "done" in g else None
    row["gemm_duty"] = row["gemm_steps_per_s"] * km / 1000 if km and row["gemm_steps_per_s"] is not None else None
    row["kernels"] = kernels_counted(rec["reads"], r.get("pid"))
    row["launched"] = len(r["done"]) * lps
    return row


def rounds_table(rec):
    """Per round: each variant's turn, the order the turns ran in (from their first steps), and
    the change of each probe variant against plain."""
    rows = [turn_row(rec, t) for t in rec["turns"]]
    out = []
    for i in sorted({t["round"] for t in rec["turns"]}):
        turns = {x["variant"]: x for x in rows if x["round"] == i}
        ran = [v for v, x in sorted(turns.items(), key=lambda kv: kv[1].get("first", float("inf")))]
        plain = turns.get("plain", {}).get("launches_per_s")
        rd = {"round": i, "turns": turns, "order": ran if all("first" in x for x in turns.values()) else None,
              "planned": planned_order(i, turns)}
        for v in ("probe", "traced"):
            rate = turns.get(v, {}).get("launches_per_s")
            rd[v] = rate / plain - 1 if rate and plain else None
        out.append(rd)
    return rows, out


def drift(rounds):
    """The plain turns alone: max/min - 1 over all of them, and each adjacent pair of rounds'
    plain against plain."""
    plain = [r["turns"].get("plain", {}).get("launches_per_s") for r in rounds]
    have = [p for p in plain if p]
    adjacent = [b / a - 1 for a, b in zip(plain, plain[1:]) if a and b]
    return (max(have) / min(have) - 1 if len(have) > 1 else None), adjacent


def stats(xs):
    return {"n": len(xs), "median": statistics.median(xs), "mean": statistics.fmean(xs),
            "min": min(xs), "max": max(xs), "slower": sum(1 for x in xs if x < 0)} if xs else None


def verdict(med, adjacent):
    if med is None:
        return "verdict: no round has both turns measured: nothing to read"
    if not adjacent:
        return "verdict: no two adjacent rounds with plain measured: no drift control, so no reading"
    lim = max(abs(x) for x in adjacent)
    if abs(med) > lim:
        return (f"verdict: the probe's median change {med:+.1%} is outside the plain-vs-plain spread between "
                f"adjacent rounds (±{lim:.1%}): this run separates the probe's cost from drift")
    return (f"verdict: the probe's median change {med:+.1%} is within the plain-vs-plain spread between adjacent "
            f"rounds (±{lim:.1%}): this run does not separate the probe's cost from drift")


def fmt(x, spec, none="-"):
    return none if x is None else format(x, spec)


def summary_lines(rec):
    if "turns" not in rec:
        return legacy_lines(rec)
    rows, rounds = rounds_table(rec)
    traced = any(t["variant"] == "traced" for t in rec["turns"])
    lines = [f"\noverhead phase: {len(rounds)} rounds of a launch-bound loop ({rec.get('launches_per_step')} "
             f"launches a step), {rec['turn_s']:g} s turns counted from {rec['from']:g} s to "
             f"{rec['turn_s'] - rec['gap']:g} s in, beside a GEMM stream at duty {rec.get('duty')} "
             f"through all of them"]
    if rec.get("not_ready"):
        lines.append(f"  not ready when the rounds started ({rec.get('ready_s', 0):.0f} s after spawning): "
                     f"{', '.join(rec['not_ready'])}")
    else:
        lines.append(f"  every tenant ready {rec.get('ready_s', 0):.1f} s after spawning, before the rounds")
    lines.append(f"{'turn':20} {'launches/s':>10} {'us/launch':>9} {'gemm st/s':>9} {'duty':>5} "
                 f"{'probe kernels':>13} {'of launched':>11}")
    for x in rows:
        if "error" in x:
            lines.append(f"{x['name']:20} {x['error']}")
            continue
        share = x["kernels"] / x["launched"] if x["kernels"] is not None and x["launched"] else None
        lines.append(f"{x['name']:20} {fmt(x['launches_per_s'], ',.0f'):>10} {fmt(x['us_per_launch'], '.2f'):>9} "
                     f"{fmt(x['gemm_steps_per_s'], '.1f'):>9} {fmt(x['gemm_duty'], '.3f'):>5} "
                     f"{fmt(x['kernels'], ',.0f'):>13} {fmt(share, '.0%'):>11}")
    lines.append(f"\n{'round':>5} {'order':20} {'plain l/s':>10} {'probe l/s':>10} {'change':>7}"
                 + (f" {'traced l/s':>10} {'change':>7}" if traced else ""))
    for r in rounds:
        t = r["turns"]
        order = ",".join(r["order"]) if r["order"] else "?"
        lines.append(f"{r['round']:5} {order:20} {fmt(t.get('plain', {}).get('launches_per_s'), ',.0f'):>10} "
                     f"{fmt(t.get('probe', {}).get('launches_per_s'), ',.0f'):>10} {fmt(r['probe'], '+.1%'):>7}"
                     + (f" {fmt(t.get('traced', {}).get('launches_per_s'), ',.0f'):>10} "
                        f"{fmt(r['traced'], '+.1%'):>7}" if traced else ""))
    med = None
    for v in ("probe",) + (("traced",) if traced else ()):
        s = stats([r[v] for r in rounds if r[v] is not None])
        if s is None:
            lines.append(f"{v} vs plain: no round has both turns measured")
            continue
        med = s["median"] if v == "probe" else med
        lines.append(f"{v} vs plain, {s['n']} of {len(rounds)} rounds: median {s['median']:+.1%}, mean "
                     f"{s['mean']:+.1%}, min {s['min']:+.1%}, max {s['max']:+.1%}; "
                     f"slower in {s['slower']} of {s['n']}")
    spread, adjacent = drift(rounds)
    lines.append(f"drift control: plain turns alone span {fmt(spread, '.1%', 'not measured')} (max/min - 1); "
                 f"plain vs plain between adjacent rounds: {' '.join(f'{x:+.1%}' for x in adjacent) or 'none'}")
    lines.append(verdict(med, adjacent))
    off = [str(r["round"]) for r in rounds if r["order"] and r["order"] != r["planned"]]
    unknown = [str(r["round"]) for r in rounds if not r["order"]]
    lines.append(f"order: as planned (ABBA across rounds){' where known' if unknown else ''}, from the "
                 f"turns' first steps" if not off else
                 f"order: NOT as planned in rounds {', '.join(off)} (from the turns' first steps): "
                 f"drift does not cancel there")
    if unknown:
        lines.append(f"order: unknown in rounds {', '.join(unknown)} (a turn without steps)")
    duty = [x["gemm_duty"] for x in rows if x.get("gemm_duty") is not None]
    gst = [x["gemm_steps_per_s"] for x in rows if x.get("gemm_steps_per_s") is not None]
    lines.append(f"co-tenant: asked duty {rec.get('duty')}, realized (steps/s x calibrated kernel ms) " +
                 (f"{min(duty):.3f}..{max(duty):.3f} over the turns ({min(gst):.1f}..{max(gst):.1f} steps/s)"
                  if duty else "not measured"))
    probe_turns = [x for x in rows if x["variant"] != "plain" and "error" not in x]
    counted = sum(1 for x in probe_turns if x["kernels"])
    lines.append(f"records: the probe counted kernels in {counted} of {len(probe_turns)} probe turns"
                 + ("" if counted == len(probe_turns) else "; a turn without a count may have run with records "
                    "off, so it need not show the cost with records on"))
    return lines


def legacy_lines(rec):
    """An overhead record from before the rounds: its turns once each."""
    rows = []
    for name, r in sorted(rec["tenants"].items(), key=lambda kv: kv[1].get("start", 0)):
        if not name.startswith("tiny") or "done" not in r:
            continue
        t0 = r.get("start", rec["start"]) + rec["from"]
        done = [t for t in r["done"] if t > t0]
        rate = (len(done) - 1) * 1000 / (done[-1] - done[0]) if len(done) > 1 else None
        rows.append((name, rate, kernels_counted(rec["reads"], r.get("pid"))))
    plain = next((rate for name, rate, _ in rows if name == "tiny-plain"), None)
    lines = ["\noverhead phase: a launch-bound loop's turns beside a GEMM stream at 0.35"]
    for name, rate, seen in rows:
        vs = rate / plain - 1 if plain and rate else None
        lines.append(f"{name:18} {fmt(rate, ',.0f'):>10} launches/s  "
                     f"{'' if vs is None else f'{vs:+.1%} vs plain':>16}  "
                     f"probe saw {seen} kernels")
    return lines


# ---------------------------------------------------------------- selftest (made-up data)

def fake_record(effect, drift_per_turn, traced=False, ran=None, base=1000.0, rate=110.0):
    """A phase's record as the driver writes it: the loop at `rate` steps/s, `drift_per_turn`
    lost per turn slot, the probe's turns `effect` slower; `ran` the order the turns ran in
    (default: as planned). The GEMM stream at 0.35 of 6 ms steps; the probe counts its kernels."""
    plan = schedule(ROUNDS, traced)
    ran = ran or plan
    lps, ts, frm, gap = LAUNCHES_PER_STEP, 8.0, 2.0, 1.0
    tenants, counts = {}, {}
    for slot, t in enumerate(ran):
        start = base + slot * ts
        r = rate * (1 + drift_per_turn * slot) * (1 + (effect if t["variant"] != "plain" else 0.0))
        # The first second at half speed, as while the previous turn's process exits: not counted.
        done = [start + (k + 1) * 2 / r for k in range(int(r / 2))]
        done += [done[-1] + (k + 1) / r for k in range(int((ts - gap - 1.0) * r))]
        done = [round(x, 5) for x in done]
        tenants[t["name"]] = {"kind": "tiny", "pid": 100 + slot, "start": start, "done": done}
        if t["variant"] != "plain":
            counts[100 + slot] = done
    total = ts * len(plan)
    tenants[GEMM] = {"kind": "gemm", "pid": 99, "start": base, "done": [base + k * 0.006 / 0.35 for k in
                                                                         range(int(total * 0.35 / 0.006))]}
    reads = [{"t": base + s, "p": {str(pid): {"kernels": sum(1 for x in d if x <= base + s) * lps}
                                   for pid, d in counts.items()}} for s in range(int(total) + 2)]
    for s, r in enumerate(reads):
        if s < 10:
            r["p"].pop(str(101), None)  # a series that shows up late still counts
    return {"type": "overhead", "base": base, "turn_s": ts, "from": frm, "gap": gap, "duty": DUTY,
            "launches_per_step": lps, "calib": {"gemm": {"kernel_ms": 6.0}}, "turns": plan,
            "tenants": tenants, "reads": reads, "ready_s": 9.0, "not_ready": []}


def selftest():
    """Returns a record for profiler.py's selftest of the whole summary."""
    assert ROUNDS == 6, "run the selftest with the default OVERHEAD_ROUNDS"
    order = [[t["variant"] for t in schedule(4, False) if t["round"] == i] for i in range(4)]
    assert order == [["plain", "probe"], ["probe", "plain"]] * 2, order
    t3 = [t["variant"] for t in schedule(2, True)]
    assert t3 == ["plain", "probe", "traced", "traced", "probe", "plain"], t3
    assert [t["offset"] for t in schedule(2, False)] == [0, TURN_S, 2 * TURN_S, 3 * TURN_S]

    # The probe 10 % slower under a drift of 2 % a turn (22 % over the phase: about what the card's
    # two plain turns differed by).
    rec = fake_record(-0.10, -0.02)
    rows, rounds = rounds_table(rec)
    probe = [r["probe"] for r in rounds]
    s = stats(probe)
    assert abs(s["median"] + 0.10) < 0.003 and abs(s["mean"] + 0.10) < 0.003, s
    assert min(probe) < -0.11 and max(probe) > -0.09, probe  # each round alone carries the drift
    assert abs(rows[0]["launches_per_s"] - 110_000) < 200, rows[0]  # the half-speed first second left out
    assert abs(rows[0]["us_per_launch"] - 1e6 / 110_000) < 0.01, rows[0]
    assert all(abs(x["gemm_duty"] - 0.35) < 0.01 for x in rows), [x["gemm_duty"] for x in rows]
    assert all((x["kernels"] is None) == (x["variant"] == "plain") for x in rows), [x["kernels"] for x in rows]
    spread, adjacent = drift(rounds)
    assert abs(spread - (1 / 0.78 - 1)) < 0.01 and len(adjacent) == 5, (spread, adjacent)
    text = "\n".join(summary_lines(rec))
    assert abs(float(re.search(r"probe vs plain.*median ([-+.\d]+)%", text).group(1)) + 10) < 0.3, text
    assert "this run separates" in text and "order: as planned" in text, text
    assert "counted kernels in 6 of 6" in text and "kernel ms) 0.349..0.350 over" in text, text

    # Every round plain first: the planned ABBA says otherwise, the drift no longer cancels.
    wrong = [t for i in range(ROUNDS) for t in sorted((t for t in schedule(ROUNDS, False) if t["round"] == i),
                                                       key=lambda t: t["variant"] != "plain")]
    bad = fake_record(-0.10, -0.02, ran=wrong)
    _, br = rounds_table(bad)
    assert [r["round"] for r in br if r["order"] != r["planned"]] == [1, 3, 5], [r["order"] for r in br]
    assert all(r["planned"] == p["planned"] for r, p in zip(br, rounds)), br
    assert stats([r["probe"] for r in br])["median"] < -0.11, [r["probe"] for r in br]
    assert "NOT as planned in rounds 1, 3, 5" in "\n".join(summary_lines(bad))

    # A cost within the plain-vs-plain spread between adjacent rounds (7.1 % here) is not read as
    # one, nor none; a small one under a small drift is.
    for effect, per_turn, separates in ((-0.06, -0.02, False), (0.0, -0.02, False), (-0.03, -0.002, True)):
        r = fake_record(effect, per_turn)
        assert abs(stats([x["probe"] for x in rounds_table(r)[1]])["median"] - effect) < 0.003, effect
        assert ("this run separates" in "\n".join(summary_lines(r))) == separates, (effect, per_turn)

    # Three turns a round; a turn with no result leaves its round out and says so.
    tr = fake_record(-0.10, -0.02, traced=True)
    _, r3 = rounds_table(tr)
    assert abs(stats([r["traced"] for r in r3])["median"] + 0.10) < 0.003, [r["traced"] for r in r3]
    tr["tenants"]["tiny-r2-probe"] = {"error": "no result", "rc": 1}
    t = "\n".join(summary_lines(tr))
    assert "tiny-r2-probe        no result" in t and "probe vs plain, 5 of 6 rounds" in t, t
    assert "unknown in rounds 2" in t and "NOT as planned" not in t, t
    return rec

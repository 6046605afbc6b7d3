"""What turning kernel records off and on does to the spans the records give (issue 21, run 4,
step 1b), and what the probe's rule makes of them (crates/probe/src/spans.rs, `admit`).
  toggle_replay.py DIR STARTS.json
DIR: kineto_records.sh PART=2 unpacked (rec.<case>-<i> with `B` and `R` toggle lines,
<case>-<i>.json truths); STARTS: {case: [unix start, duration s]}.
Per tenant, over the truth window, the covered share of the milliseconds all tenants traced:
  all      every record counted (the probe before run 4);
  inside   only records wholly inside one traced stretch, stretches as toggled;
  cut      the probe's rule now: those records, and each stretch cut where a record crosses its
           end (at the record's start) or began before it (at the record's end).
`over1`: common milliseconds whose tenants' spans add up past the millisecond (where the host's
split falls back on solo estimates)."""
import bisect, glob, json, os, sys

from solo_replay import MS, load_records, timeline


def toggles(path):
    """[(on, off)] stretches with records on, in the records' clock (unix − B)."""
    base, ev = 0, []
    for line in open(path):
        p = line.split()
        if p and p[0] == "B":
            base = int(p[1])
        elif p and p[0] == "R" and len(p) == 5:
            ev.append((int(p[1]), int(p[4])))
    out, cur, st = [], -(10**18), 1
    for w, t in ev:
        if w == 0 and st == 1:
            out.append([cur, t - base])
            st = 0
        elif w == 1 and st == 0:
            cur, st = t - base, 1
    if st == 1:
        out.append([cur, 10**19])
    return base, out


def main():
    d = sys.argv[1]
    starts = json.load(open(sys.argv[2]))
    for case, (start, dur) in starts.items():
        files = sorted(glob.glob(os.path.join(d, f"rec.{case}-*")))
        if not files:
            continue
        truths = [json.load(open(os.path.join(d, f"{case}-{f.rsplit('-', 1)[1]}.json")))["truth"]
                  for f in files]
        print(f"{case}: truth " + " ".join(f"{t:.3f}" for t in truths))
        for mode in ("all", "inside", "cut"):
            lines, traced = [], []
            for f in files:
                base, iv = toggles(f)
                lo = int(start * 1e9) - base
                lo -= lo % MS
                n = int(dur * 1000)
                hi = lo + n * MS
                _, kernels, _, _ = load_records(f)
                ons = [a for a, _ in iv]
                keep = []
                for x in kernels:
                    i = bisect.bisect_right(ons, x[1]) - 1
                    inside = i >= 0 and x[1] >= iv[i][0] and x[2] <= iv[i][1]
                    if inside or mode == "all":
                        keep.append(x)
                    elif mode == "cut":
                        if i >= 0 and iv[i][0] <= x[1] < iv[i][1] < x[2]:
                            iv[i][1] = max(iv[i][0], x[1])
                        for j in range(i + 1, len(iv)):
                            if iv[j][0] >= x[2]:
                                break
                            iv[j][0] = min(x[2], iv[j][1])
                kk = [x for x in keep if x[2] > lo and x[1] < hi]
                cov, _ = timeline(kk, [e - s for (_, s, e, _, _) in kk], lo, hi)
                tr = [False] * n
                for a, b in iv:
                    for k in range(max(0, -(-(a - lo) // MS)), min(n, (b - lo) // MS)):
                        tr[k] = True
                if mode == "all":
                    # What the records that cross a toggle look like, and how much of the
                    # untraced milliseconds the records counted cover.
                    cross, before = [], []
                    for x in kernels:
                        i = bisect.bisect_right(ons, x[1]) - 1
                        if i >= 0 and x[1] < iv[i][1] < x[2]:
                            cross.append((iv[i][1] - x[1], x[2] - iv[i][1]))
                        elif i < 0 or x[1] >= iv[i][1]:
                            before.append(x[2] - x[1])
                    med = lambda v: sorted(v)[len(v) // 2] / 1e6 if v else float("nan")
                    untr = [k for k in range(n) if not tr[k]]
                    print(f"    {os.path.basename(f)}: {len(cross)} records cross a stretch's "
                          f"end (median {med([c[0] for c in cross]):.2f} ms before it to "
                          f"{med([c[1] for c in cross]):.2f} ms after); {len(before)} began "
                          f"untraced (median span {med(before):.2f} ms); counted, spans cover "
                          f"{sum(cov[k] for k in untr) / MS / max(1, len(untr)):.3f} of the "
                          f"untraced ms")
                lines.append(cov)
                traced.append(tr)
            common = [k for k in range(n) if all(t[k] for t in traced)]
            own = [sum(l[k] for k in common) / MS / max(1, len(common)) for l in lines]
            over = sum(1 for k in common if sum(l[k] for l in lines) > MS)
            print(f"  {mode:7} common {len(common):5} ms, over1 {over:5}: covered "
                  + " ".join(f"{o:.3f}" for o in own))


if __name__ == "__main__":
    main()

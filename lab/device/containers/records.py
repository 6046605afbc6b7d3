"""What the tenants' own kernel records say about a containers run (run.sh keeps them in
records.tar.xz): per phase and tenant, the share of the window its kernels covered (the sum of
their CUPTI durations), how its kernels' durations run by their place in the 100-ms period and
how long it waited between them, and the union of the pair's kernels beside the sum (what two
overlapping spans count twice).

    mkdir rec && tar xJf records.tar.xz -C rec && python3 lab/device/containers/records.py rec/rec

The window starts WARM seconds (12, driver.py's CTR_WARM) after both tenants' first kernel, as
the reads do, and ends at the first tenant's last one.
"""
import os
import statistics
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "corpus"))
from replay import load  # noqa: E402

WARM = 12e9
PAIRS = (("time-sliced", "ts-a", "ts-b"), ("mps", "mps-a", "mps-b"), ("mps-apart", "mps-c", "mps-d"))


def kernels(path):
    ks, _, off, _ = load(path)
    return [(s + off, e + off) for s, e, _, _ in ks]


def union(iv):
    total, cs, ce = 0, None, None
    for s, e in sorted(iv):
        if cs is None or s > ce:
            total += (ce - cs) if cs is not None else 0
            cs, ce = s, e
        else:
            ce = max(ce, e)
    return total + ((ce - cs) if cs is not None else 0)


def periods(ks):
    """Kernels grouped into periods: a gap over 8 ms starts the next."""
    out, cur = [], []
    for k in ks:
        if cur and k[0] - cur[-1][1] > 8e6:
            out.append(cur)
            cur = []
        cur.append(k)
    return [p for p in out + [cur] if len(p) >= 5]


def main(folder):
    for phase, a, b in PAIRS:
        paths = [os.path.join(folder, f"{phase}-{t}.1") for t in (a, b)]
        if not all(os.path.exists(p) for p in paths):
            continue
        pair = [kernels(p) for p in paths]
        t0 = max(k[0][0] for k in pair) + WARM
        t1 = min(k[-1][1] for k in pair)
        pair = [[k for k in ks if k[0] >= t0 and k[1] <= t1] for ks in pair]
        w = t1 - t0
        shares = [sum(e - s for s, e in ks) / w for ks in pair]
        both = union(pair[0] + pair[1]) / w
        print(f"{phase}: kernels' share {shares[0]:.3f} ({a}) + {shares[1]:.3f} ({b}) = {sum(shares):.3f}; "
              f"union {both:.3f}; counted twice {sum(shares) - both:.3f}")
        for t, ks in zip((a, b), pair):
            ps = periods(ks)
            n = int(statistics.median(len(p) for p in ps))
            dur = [statistics.median((p[i][1] - p[i][0]) / 1e6 for p in ps if len(p) > i) for i in range(n)]
            gap = statistics.median((p[i + 1][0] - p[i][1]) / 1e3 for p in ps for i in range(len(p) - 1))
            print(f"  {t}: {len(ps)} periods of {n} kernels; duration by place (ms) first "
                  f"{' '.join(f'{d:.2f}' for d in dur[:4])}, last {' '.join(f'{d:.2f}' for d in dur[-4:])}; "
                  f"median wait between its kernels {gap:.0f} us")


if __name__ == "__main__":
    main(sys.argv[1])

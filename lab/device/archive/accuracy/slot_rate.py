"""What a duty-cycled probe's traced slots sample of its tenant: launches (CUDA graph launches or
kernels, by correlation id) a second inside the slots against the requests the tenant served
over its truth window, and the launch rate by millisecond after each toggle on (issue 21, the
micro tenant beside a long matmul; docs/validation.md). CUPTI numbers every API call, records
on or off, so the jump in correlation id across an untraced gap counts the calls made in it:
the rate in the gaps against the rate in the slots is what the slots under-sample, and the
kernel time in the slots scaled by it is what the tenant ran.
  slot_rate.py REC RAW.json [SLOT_MS]
REC is a probe record log (TESSERA_PROBE_RECORD_LOG's rec.<pid>), RAW.json the tenant's entry
from the suite (start, dur, served). SLOT_MS (default 20) picks the slots: stretches of records
on shorter than 1.25 slots."""
import bisect, json, sys

from solo_replay import load_records, traced_stretches


def main():
    rec, raw = sys.argv[1], json.load(open(sys.argv[2]))
    slot_ms = float(sys.argv[3]) if len(sys.argv) > 3 else 20.0
    _, kernels, toggles, clocks = load_records(rec)
    if not kernels or not clocks:
        sys.exit(f"{rec}: no kernels or no clock pairs")
    cupti, unix = clocks[-1]
    lo = int(raw["start"] * 1e9) - (unix - cupti)
    hi = lo + int(raw["dur"] * 1e9)
    first = {}
    for (_, start, _, _, corr) in kernels:
        first.setdefault(corr, start)
    launches = sorted(first.values())
    slots = [(a, b) for a, b in traced_stretches(toggles, kernels[-1][2])
             if lo <= a and b <= hi and b - a < 1.25 * slot_ms * 1e6]
    if not slots:
        sys.exit("no slots inside the truth window")
    traced = sum(b - a for a, b in slots)
    inside = sum(bisect.bisect_left(launches, b) - bisect.bisect_left(launches, a) for a, b in slots)
    served = sum(raw["served"]) / raw["dur"]
    print(f"{len(slots)} slots inside the truth window, {traced / 1e9:.3f} s traced")
    print(f"launches in slots: {inside} = {inside / (traced / 1e9):.0f}/s; served over the window "
          f"{served:.0f}/s ({(inside / (traced / 1e9) / served - 1) * 100:+.1f} %)")
    # API calls a millisecond: inside the slots (records) and across the gaps (correlation ids).
    calls_in = calls_gap = t_in = t_gap = 0
    busy = 0
    order = sorted((start, corr, end) for (_, start, end, _, corr) in kernels if lo <= start < hi)
    for a, b in slots:
        i, j = bisect.bisect_left(order, (a,)), bisect.bisect_left(order, (b,)) - 1
        if j > i:
            calls_in += order[j][1] - order[i][1]
            t_in += order[j][0] - order[i][0]
        # Only records wholly inside the slot, as the probe believes them.
        busy += sum(e - s for (s, _, e) in order[i:j + 1] if a <= s and e <= b)
    for (_, b), (a, _) in zip(slots, slots[1:]):
        i, j = bisect.bisect_left(order, (b,)) - 1, bisect.bisect_left(order, (a,))
        if 0 <= i < j < len(order):
            calls_gap += order[j][1] - order[i][1]
            t_gap += order[j][0] - order[i][0]
    if t_in and t_gap and calls_in:
        r_in, r_gap = calls_in / (t_in / 1e6), calls_gap / (t_gap / 1e6)
        print(f"API calls a ms: {r_in:.3f} in the slots, {r_gap:.3f} across the gaps "
              f"(x{r_gap / r_in:.3f})")
        r_all = (order[-1][1] - order[0][1]) / ((order[-1][0] - order[0][0]) / 1e6)
        r_slots = inside / (traced / 1e6)
        print(f"kernel time in the slots {busy / traced:.3f} of them; scaled by the gaps' rate "
              f"{busy / traced * r_gap / r_in:.3f}; by the window's calls ({r_all:.3f} a ms) "
              f"over the launches in the slots ({r_slots:.3f} a ms) {busy / traced * r_all / r_slots:.3f}")
    n = int(slot_ms)
    by = [0] * n
    for a, _ in slots:
        for k in range(n):
            by[k] += (bisect.bisect_left(launches, a + (k + 1) * 1_000_000)
                      - bisect.bisect_left(launches, a + k * 1_000_000))
    print("launches per ms, by ms after the toggle on:")
    print(" ".join(f"{k}:{v / len(slots):.2f}" for k, v in enumerate(by)), flush=True)


if __name__ == "__main__":
    main()

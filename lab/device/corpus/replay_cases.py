"""Writes the split's inputs for every read of a run's heavy draws, rebuilt from the probes'
record logs (RECORD_LOG=1), so that the Rust split itself can be run on them offline:
`crates/exporter/examples/replay_forged.rs` reads them, runs tessera's split honest and with
one tenant's timeline forged, and tables what each lie does to the others (docs/validation.md,
"Forged timelines").

  replay_cases.py RUN_OUT [RUN_OUT ...] > cases.jsonl

RUN_OUT: a run's output folder (corpus.jsonl[.xz], records.tar.xz unpacked to rec/). One line
per read whose tenants (the memory holder aside) all left a log covering the read's published
window: the device's reading over it, and per tenant its kind, NVML's booking, the share of
the window its probe traced, its kernels in the window, the truth over the window (its request
log) and its clock band (analyze.py's `Clocks`), and its timeline there, per millisecond: covered, solo (ctx2-band, the shipped estimator),
floor (ctx2-fastest: each kernel at most its estimate), traced. Every tenant is written as it
ran: the corpus's forging relays changed what tessera read, not the records, so a draw with a
liar is an honest draw here."""
import bisect
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from replay import (BUCKET, MAKERS, load, published_reads, run_clocks, timeline, traced_in,  # noqa: E402
                    window_truth)


def line_of(path):
    """A log's point and floor timelines by unix ms, whether each ms was traced, where its
    records end, and its kernels' end times (unix ns, sorted)."""
    ks, stretches, off, shapes = load(path)
    graph_of = {sid: node for sid, (_, node) in shapes.items()}
    shifted = [(s + off, e + off, sh, x) for s, e, sh, x in ks]
    del ks
    point = timeline(shifted, MAKERS["ctx2-band"](graph_of))
    floor = timeline(shifted, MAKERS["ctx2-fastest"](graph_of))
    ends = sorted(e for _, e, _, _ in shifted)
    end = shifted[-1][1] if shifted else 0
    del shifted
    st = [(a + off, min(b + off, end if end else b)) for a, b in stretches]
    return point, traced_in(st), end, floor, ends


def cases(out_dir, mode):
    run = os.path.basename(os.path.normpath(out_dir))
    clk = run_clocks(out_dir)
    for d, tens, cached, r, w, lo, hi in published_reads(out_dir, mode, line_of):
        g = next(iter(r["gpu"].values()), {})
        device = g.get("device_window")
        if device is None:
            device = g.get("device")
        if device is None:
            continue
        procs = g.get("procs", {})
        out = []
        for t, (point, traced, _, floor, ends) in zip(tens, cached):
            pid = str(t["pid"])
            cov, solo, flo, tr = [], [], [], []
            for b in range(lo, hi):
                c, s = point.get(b, (0, 0.0))
                f = floor.get(b, (0, 0.0))[1]
                cov.append(round(c / BUCKET, 4))
                solo.append(round(min(s, c) / BUCKET, 4))
                flo.append(round(min(f, s, c) / BUCKET, 4))
                tr.append(1 if traced(b) else 0)
            kernels = bisect.bisect_left(ends, hi * BUCKET) - bisect.bisect_left(ends, lo * BUCKET)
            p = procs.get(pid) or [None, None, None, None]
            out.append({
                "pid": int(pid), "kind": t["kind"], "nvml": p[0], "traced_share": p[3],
                "kernels": kernels, "truth": window_truth(t, w),
                "band": clk.band(t["kind"], window_truth(t, w), w[0], w[1]),
                "covered": cov, "solo": solo, "floor": flo, "traced": tr,
            })
        yield {"run": run, "draw": d["draw"], "mode": mode, "t": r["t"], "window": w,
               "device": device, "tenants": out}


def main():
    for out_dir in sys.argv[1:]:
        for mode in ("ts", "mps"):
            n = 0
            for c in cases(out_dir, mode):
                print(json.dumps(c, separators=(",", ":")))
                n += 1
            print(f"{out_dir} {mode}: {n} reads", file=sys.stderr)


if __name__ == "__main__":
    main()

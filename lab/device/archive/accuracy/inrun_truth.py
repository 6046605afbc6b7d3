"""A one-kernel tenant's truth from its own kernel records during the run (issue 21, run 5):
requests served × the mean duration of its kernels, over the truth window. The calibration
behind suite.py's truths runs requests back to back, at full power; a power-bound kernel
(a 16384² matmul) runs faster at 30 % duty: 10.9 ms in the run against 11.9 ms calibrated.
  inrun_truth.py REC SERVED DUR_S
REC: the tenant's record log (TESSERA_PROBE_RECORD_LOG with TESSERA_PROBE_RECORDS=always);
its first kernel (the warm-up) is left out."""
import statistics, sys

from solo_replay import load_records


def main():
    rec, served, dur = sys.argv[1], int(sys.argv[2]), float(sys.argv[3])
    _, kernels, _, _ = load_records(rec)
    ms = [(end - start) / 1e6 for (_, start, end, _, _) in kernels[1:]]
    if not ms:
        sys.exit(f"{rec}: no kernels after the first")
    mean = statistics.mean(ms)
    print(f"{len(ms)} kernels: mean {mean:.3f} ms, median {statistics.median(ms):.3f} ms; "
          f"truth from the run's own records {served * mean / 1e3 / dur:.3f}")


if __name__ == "__main__":
    main()

"""Tables of overhead_within.py output.
  overhead_within_table.py within.jsonl...       per process, the median µs per launch before
      the probe attached and after (records off / on), and the change; for plain runs, the
      second half of the run over the first (the drift a process shows on its own).
  overhead_within_table.py blocks-*.txt.gz...    the same from every block, at the 10th
      percentile as well as the median. The loop runs in two speeds on the H100 machine
      (about 6.5 and 10 µs a launch, switching every few seconds, probe or not), so a median
      can compare one speed before with the other after; the 10th percentile follows the
      faster one where both halves hold some of it."""
import gzip, json, os, statistics, sys, collections


def q(values, p):
    v = sorted(values)
    return v[int(p * (len(v) - 1))] if v else float("nan")


def from_summaries(paths):
    changes = collections.defaultdict(list)
    print("| run | before (µs/launch) | after: records off | after: records on | change |")
    print("|---|---|---|---|---|")
    for path in paths:
        for line in open(path):
            if not line.startswith("{"):
                continue
            r = json.loads(line)
            med = lambda k: r[k]["median_us"] if k in r else None
            if r["name"] == "plain":
                early, late = med("control-early"), med("control-late")
                change = late / early - 1
                row = (f"{early:.2f} (first half)", f"{late:.2f} (second half)", "")
            else:
                before, off, on = med("before"), med("off"), med("on")
                if before is None:
                    continue
                # Records never turned on file as "on" (the attach is the only event).
                never = "RECORDS=never" in r["name"]
                after = on if never or off is None else off
                change = after / before - 1
                row = (f"{before:.2f}", f"{after:.2f}" if never or off else "",
                       "" if never else f"{on:.2f}")
            changes[r["name"]].append(change)
            print(f"| {r['name']} | {row[0]} | {row[1]} | {row[2]} | {100 * change:+.1f} % |")
    print()
    print("| variant | processes | change (median) |")
    print("|---|---|---|")
    for name, c in changes.items():
        print(f"| {name} | {len(c)} | {100 * statistics.median(c):+.1f} % |")


def from_blocks(paths):
    print("| blocks | compared | p10 (µs/launch) | p10 change | median | median change |")
    print("|---|---|---|---|---|---|")
    for path in paths:
        rows = [line.split() for line in gzip.open(path, "rt")]
        if not rows:
            continue
        if rows[0][2] == "-":
            half = (int(rows[0][0]) + int(rows[-1][0])) // 2
            a = [float(r[1]) for r in rows if int(r[0]) < half]
            b = [float(r[1]) for r in rows if int(r[0]) >= half]
            what = "first half → second"
        else:
            attached = min(int(r[0]) for r in rows if r[2] != "before")
            settled = [r for r in rows if int(r[0]) > attached + 3_000_000_000]
            a = [float(r[1]) for r in rows if r[2] == "before"]
            b = [float(r[1]) for r in settled if r[2] == "off"]
            what = "before → records off"
            if not b:
                b = [float(r[1]) for r in settled if r[2] == "on"]
                what = "before → attached"
        pa, pb, ma, mb = q(a, 0.1), q(b, 0.1), q(a, 0.5), q(b, 0.5)
        print(f"| {os.path.basename(path)} | {what} | {pa:.2f} → {pb:.2f} | {100 * (pb / pa - 1):+.0f} % "
              f"| {ma:.2f} → {mb:.2f} | {100 * (mb / ma - 1):+.0f} % |")


paths = sys.argv[1:]
(from_blocks if paths and all(p.endswith(".gz") for p in paths) else from_summaries)(paths)

"""Table of overhead_within.py lines: per process, the median µs per launch before the probe
attached and after (records off / on), and the change; for plain runs, the second half of
the run over the first (the drift a process shows on its own).
Usage: overhead_within_table.py within.jsonl..."""
import json, sys, statistics, collections

changes = collections.defaultdict(list)
print("| run | before (µs/launch) | after: records off | after: records on | change |")
print("|---|---|---|---|---|")
for path in sys.argv[1:]:
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
            after = on if never else (off if off is not None else on)
            change = after / before - 1
            row = (f"{before:.2f}", f"{after:.2f}" if (never or off) else "",
                   "" if never else f"{on:.2f}")
        changes[r["name"]].append(change)
        print(f"| {r['name']} | {row[0]} | {row[1]} | {row[2]} | {100 * change:+.1f} % |")
print()
print("| variant | processes | change (median) |")
print("|---|---|---|")
for name, c in changes.items():
    print(f"| {name} | {len(c)} | {100 * statistics.median(c):+.1f} % |")

"""Paired launch overhead from overhead.py lines: each variant's tiny-kernel µs/op over the
`plain` run of its own round (a round starts at every `plain:` line), as a median ratio.
Usage: overhead_table.py FILE..."""
import re, sys, statistics, collections
ratios, runs = collections.defaultdict(list), collections.defaultdict(list)
for path in sys.argv[1:]:
    plain = None
    for line in open(path):
        m = re.match(r"(\S+): tiny ([\d.]+) us/op", line)
        if not m: continue
        name, us = m.group(1), float(m.group(2))
        runs[name].append(us)
        if name == "plain": plain = us
        elif plain: ratios[name].append(us / plain)
print("| variant | rounds | µs/op (median) | overhead vs plain, paired (median) |")
print("|---|---|---|---|")
print(f"| plain | {len(runs['plain'])} | {statistics.median(runs['plain']):.2f} | |")
for name, r in sorted(ratios.items(), key=lambda kv: statistics.median(kv[1])):
    print(f"| {name} | {len(r)} | {statistics.median(runs[name]):.2f} | {100 * (statistics.median(r) - 1):+.1f} % |")

"""Tables for docs/validation.md from run.sh's results.jsonl (one or more files).
(a) µs per launch by round: plain, probe loaded (alone, records never on), records always on,
    with each variant's change against the round's plain run; (b) the delay from the second
    tenant's first kernel until its device's shares are published again."""
import json, statistics, sys
rows = [json.loads(l) for f in sys.argv[1:] for l in open(f) if l.startswith("{")]
loops = [r for r in rows if "median_us" in r]
rounds = sorted({r["round"] for r in loops})
if loops:
    print("| round | plain median / p10 | probe alone median / p10 (records on) | change | records always median / p10 | change |")
    print("|---|---|---|---|---|---|")
    ch = {"probe": [], "always": []}
    for i in rounds:
        by = {r["name"]: r for r in loops if r["round"] == i}
        p = by.get("plain")
        cells = [f"{p['median_us']:.2f} / {p['p10_us']:.2f}" if p else "–"]
        for v in ("probe", "always"):
            r = by.get(v)
            if not (r and p):
                cells += ["–", "–"]; continue
            dm, dp = r["median_us"] / p["median_us"] - 1, r["p10_us"] / p["p10_us"] - 1
            ch[v].append((dm, dp))
            on = f" ({r['records_turned_on']})" if v == "probe" else ""
            cells += [f"{r['median_us']:.2f} / {r['p10_us']:.2f}{on}", f"{dm*100:+.1f} / {dp*100:+.1f} %"]
        print(f"| {i} | " + " | ".join(cells) + " |")
    for v, c in ch.items():
        if c:
            print(f"\n{v}: median of the rounds' changes {statistics.median(x for x, _ in c)*100:+.1f} % "
                  f"(median), {statistics.median(y for _, y in c)*100:+.1f} % (p10)")
    plain = [r["median_us"] for r in loops if r["name"] == "plain"]
    if len(plain) > 1:
        print(f"plain runs alone: medians {min(plain):.2f} to {max(plain):.2f} µs "
              f"({(max(plain)/min(plain)-1)*100:.0f} % apart)")
pairs = [r for r in rows if "pair" in r]
if pairs:
    print("\n| pair | B a candidate | both shares published | method then | shares then (A / B) | split by timelines |")
    print("|---|---|---|---|---|---|")
    for r in pairs:
        fb = r.get("first_both") or {}
        sh = fb.get("share", {})
        print(f"| {r['pair']} | {r['b_candidate_after_s']} s | {r['both_shares_after_s']} s | "
              f"{fb.get('why', '')[:45]} | {' / '.join(f'{v:.3f}' for v in sh.values())} | "
              f"{r.get('timelines_after_s', '?')} s |")

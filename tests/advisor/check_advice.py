#!/usr/bin/env python3
"""Check `tessera advise --format json` against the known workload shapes of
gen_history.py (SHAPES): each workload's action, MIG profile or MPS client
count, GPUs saved (within 0.02) and money (GPUs saved x price x 730 h).

    check_advice.py advice.json --price 2.5

Prints ok/FAIL lines and "check_advice: N passed, M failed".
"""
import argparse
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "prometheus"))
from checker import Checker  # noqa: E402
from gen_history import SHAPES  # noqa: E402


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("report")
    ap.add_argument("--price", type=float, required=True)
    a = ap.parse_args()
    c = Checker()
    with open(a.report, encoding="utf-8") as f:
        doc = json.load(f)
    got = {}
    for adv in doc["advice"]:
        k = adv["profile"]["key"]
        got[f"{k['namespace']}/{k['kind']}/{k['name']}"] = adv
    c.check(sorted(got) == sorted(SHAPES), f"one row per known workload ({len(got)} rows)")
    for key, want in SHAPES.items():
        adv = got.get(key)
        if adv is None:
            c.fail(f"{key}: missing from the report")
            continue
        what = f"{key} ({want['shape']})"
        c.check(adv["action"] == want["action"],
                f"{what}: {adv['action']} (want {want['action']}): {adv['summary']} -- {adv['reason']}")
        if "profile" in want:
            c.check(adv.get("mig_profile") == want["profile"], f"{key}: MIG profile {adv.get('mig_profile')} (want {want['profile']})")
        if "clients" in want:
            c.check(adv.get("clients") == want["clients"] and adv.get("active_thread_percentage", 0) > 0
                    and adv.get("pinned_memory_limit_gib", 0) > 0,
                    f"{key}: MPS {adv.get('clients')} clients per GPU with limits "
                    f"{adv.get('active_thread_percentage')} % / {adv.get('pinned_memory_limit_gib')} GiB (want {want['clients']} clients)")
        if want["action"] == "decline":
            c.check(want["reason"] in adv["reason"] or want["reason"] in adv["summary"] or
                    (want["reason"] == "compute" and "compute figure" in adv["reason"]),
                    f"{key}: declines for lack of {want['reason']}: {adv['reason']}")
            c.check(adv["confidence"] is None, f"{key}: a decline claims no confidence")
        c.check(abs(adv["gpus_saved"] - want["gpus_saved"]) < 0.02,
                f"{key}: {adv['gpus_saved']:.3f} GPUs saved (want {want['gpus_saved']:.3f})")
        money = adv["money_saved_per_month"]
        c.check(money is not None and abs(money - adv["gpus_saved"] * a.price * 730) < 0.01,
                f"{key}: {money} per month = GPUs saved x {a.price} x 730 h")
    total = sum(w["gpus_saved"] for w in SHAPES.values())
    c.check(abs(doc["total_gpus_saved"] - total) < 0.05, f"total {doc['total_gpus_saved']:.2f} GPUs saved (want {total:.2f})")
    print(f"check_advice: {c.passed} passed, {c.failed} failed")
    return 1 if c.failed else 0


if __name__ == "__main__":
    sys.exit(main())

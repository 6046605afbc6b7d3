#!/usr/bin/env python3
"""Break a captured `tessera --demo --metrics.dcgm-compat` exposition the ways that must make
scripts/test-dcgm-compat.sh fail, to show its checks can fail.

    break.py MODE CAPTURE FULL_OUT DCGM_OUT

MODE: copy (every pod on a shared device handed the device's value and no remainder: dcgm-exporter
#582/#587/#642), one (one pod handed the whole device: #307), notemp (GPU 4's temperature
missing), remainder-pod (a remainder series given some pod's labels), nopodlabels (remainder
series without pod labels at all, instead of empty ones), none. Writes the whole exposition and
the DCGM families alone (the second listener's body).
"""
import re
import sys

SAMPLE = re.compile(r"^(DCGM_FI_[A-Z0-9_]+)\{(.*)\} (\S+)$")
EXCLUSIVE = ("exclusive", "mig", "vgpu")


def lab(s, k):
    m = re.search(r"(?:^|,)" + k + r'="([^"]*)"', s)
    return m.group(1) if m else ""


def main(mode, src, full, dcgm):
    lines = open(src, encoding="utf-8").read().splitlines()
    groups = {}
    for i, line in enumerate(lines):
        m = SAMPLE.match(line)
        if m and lab(m.group(2), "sharing_mode").split("+")[-1] not in EXCLUSIVE:
            key = (m.group(1), lab(m.group(2), "UUID"), lab(m.group(2), "GPU_I_ID"))
            groups.setdefault(key, []).append(i)
    drop = set()
    for idx in groups.values():
        total = sum(float(SAMPLE.match(lines[i]).group(3)) for i in idx)
        tenants = [i for i in idx if lab(SAMPLE.match(lines[i]).group(2), "pod")]
        if mode == "copy" and tenants:
            for i in tenants:
                m = SAMPLE.match(lines[i])
                lines[i] = f"{m.group(1)}{{{m.group(2)}}} {total}"
            drop |= set(idx) - set(tenants)
        elif mode == "one" and tenants:
            m = SAMPLE.match(lines[tenants[0]])
            lines[tenants[0]] = f"{m.group(1)}{{{m.group(2)}}} {total}"
            drop |= set(idx) - {tenants[0]}
    for i, line in enumerate(lines):
        if mode == "notemp" and line.startswith('DCGM_FI_DEV_GPU_TEMP{gpu="4"'):
            drop.add(i)
        if mode == "remainder-pod" and line.startswith("DCGM_FI_DEV_FB_USED{") and 'gpu="4"' in line:
            lines[i] = line.replace('container="",namespace="",pod=""', 'container="x",namespace="y",pod="z"')
        if mode == "nopodlabels" and line.startswith("DCGM_FI_"):
            lines[i] = line.replace('container="",namespace="",pod="",', "")
    out = [line for i, line in enumerate(lines) if i not in drop]
    with open(full, "w", encoding="utf-8") as f:
        f.write("\n".join(out) + "\n")
    only = [l for l in out if l.startswith("DCGM_FI_") or re.match(r"^# (TYPE|HELP) DCGM_FI_", l)]
    with open(dcgm, "w", encoding="utf-8") as f:
        f.write("\n".join(only + ["# EOF"]) + "\n")


if __name__ == "__main__":
    if len(sys.argv) != 5:
        sys.exit(__doc__)
    main(*sys.argv[1:])

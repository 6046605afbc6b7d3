#!/usr/bin/env python3
"""Copy alerts/*.yaml and dashboards/*.json into the Helm chart's files/ directory.

    deploy/helm/sync-files.py            # refresh deploy/helm/tessera/files/
    deploy/helm/sync-files.py --check    # exit 1 if a copy is missing, stale or extra

Helm reads files (.Files.Get/.Glob) only from inside the chart directory, and a chart must
not contain symlinks (`helm package` and chart repositories reject or flatten them), so the
chart carries byte-for-byte copies. scripts/test-helm.sh runs --check, and also compares the
rendered PrometheusRule and dashboards ConfigMap with the sources.
"""
import glob
import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
CHART_FILES = os.path.join(ROOT, "deploy/helm/tessera/files")
SETS = [("alerts", "*.yaml"), ("dashboards", "*.json")]


def wanted():
    out = {}
    for sub, pattern in SETS:
        for src in sorted(glob.glob(os.path.join(ROOT, sub, pattern))):
            with open(src, "rb") as f:
                out[os.path.join(sub, os.path.basename(src))] = f.read()
    return out


def present():
    out = {}
    for sub, _ in SETS:
        for path in sorted(glob.glob(os.path.join(CHART_FILES, sub, "*"))):
            with open(path, "rb") as f:
                out[os.path.join(sub, os.path.basename(path))] = f.read()
    return out


def main():
    want, have = wanted(), present()
    if "--check" in sys.argv[1:]:
        problems = [f"missing {k}" for k in want if k not in have]
        problems += [f"stale {k}" for k in want if k in have and have[k] != want[k]]
        problems += [f"extra {k}" for k in have if k not in want]
        for p in problems:
            print(f"deploy/helm/tessera/files: {p}", file=sys.stderr)
        if problems:
            print("run deploy/helm/sync-files.py", file=sys.stderr)
            return 1
        return 0
    for k in have:
        if k not in want:
            os.remove(os.path.join(CHART_FILES, k))
    for k, data in want.items():
        path = os.path.join(CHART_FILES, k)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "wb") as f:
            f.write(data)
    print(f"synced {len(want)} files into deploy/helm/tessera/files")
    return 0


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/env python3
"""`helm template` for deploy/helm/tessera without a helm binary: the Helm v4 engine from
helm-python-sdk (pip install -r tests/helm/requirements.txt) renders the chart offline.

    scripts/helm-template.py [-f values.yaml]... [--set key=value]... \\
        [--namespace tessera] [--name tessera] > tessera.yaml
    kubectl create namespace tessera && kubectl apply --server-side -f tessera.yaml

Values are merged as helm does: the chart's values.yaml, then each -f file, then each --set.
"""
import argparse
import os
import sys

CHART = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "deploy/helm/tessera")


def merge(into, new):
    for k, v in new.items():
        if isinstance(v, dict) and isinstance(into.get(k), dict):
            merge(into[k], v)
        else:
            into[k] = v
    return into


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("-f", "--values", action="append", default=[], help="values file (repeatable)")
    ap.add_argument("--set", action="append", default=[], help="key=value as in helm --set (repeatable)")
    ap.add_argument("--namespace", default="tessera")
    ap.add_argument("--name", default="tessera", help="release name")
    a = ap.parse_args()
    try:
        import helm_python as helm
    except ImportError:
        sys.exit("helm-template: needs helm-python-sdk: pip install -r tests/helm/requirements.txt")
    try:
        values = {}
        for path in a.values:
            with open(path, encoding="utf-8") as f:
                merge(values, helm.values_from_yaml(f.read()))
        for expr in a.set:
            merge(values, helm.parse_set_string(expr))
        with helm.Chart.load(CHART) as chart:
            manifests = chart.render(values, name=a.name, namespace=a.namespace, is_install=True)
    except (OSError, helm.HelmError) as e:
        sys.exit(f"helm-template: {e}")
    for path in sorted(manifests):
        text = manifests[path].strip()
        if path.endswith("NOTES.txt"):
            print(text, file=sys.stderr)
        elif text:
            print(f"---\n# Source: {path}\n{text}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

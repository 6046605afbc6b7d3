#!/usr/bin/env python3
"""Render, lint and validate the Helm chart offline, and hold it to the kustomize base.

    test_chart.py --root . --base base.yaml --dra dra.yaml [--help-text tessera-help.txt]

(base.yaml / dra.yaml: `kubectl kustomize deploy/base` / `deploy/overlays/dra` output.)

Helm itself comes from helm-python-sdk (the Helm v4 engine as a C library). Checks:
- deploy/helm/tessera/files/ are current copies of alerts/ and dashboards/;
- `helm lint --strict` (no warnings) with default values and with every toggle on;
- renders (default, every toggle on, and variants) parse, and every built-in object passes
  kubernetes-validate --strict for each Kubernetes version; the CRD objects are checked here;
- the default render agrees with the kustomize base on image, args, env, ports, probes,
  mounts, hostPaths, scheduling, resources, RBAC rules and security contexts; with DRA on
  it agrees with the DRA overlay;
- the PrometheusRule's groups equal alerts/*.yaml, the dashboards ConfigMap holds every
  dashboards/*.json byte for byte;
- values.schema.json rejects a wrong type and an unknown key;
- with --help-text: every flag the chart passes exists in `tessera --help`.

Prints "ok ..."/"FAIL ..." and "test_chart: N passed, M failed".
"""
import argparse
import copy
import glob
import os
import re
import subprocess
import sys

import yaml

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "prometheus"))
from checker import Checker  # noqa: E402

K8S_VERSIONS = ["1.30.0", "1.34.0"]
# The chart requires 1.34 (Chart.yaml kubeVersion: the oldest run against a real API server);
# lint at its floor and at the newest tested.
HELM_KUBE_VERSIONS = ["1.34.0", "1.37.0"]
CRD_KINDS = {"ServiceMonitor", "PodMonitor", "PrometheusRule"}
RELEASE = {"name": "tessera", "namespace": "tessera"}

ALL_ON = {
    "serviceMonitor": {"enabled": True, "labels": {"release": "kube-prometheus-stack"},
                       "relabelings": [{"targetLabel": "cluster", "replacement": "gpu-a"}]},
    "podMonitor": {"enabled": True},
    "prometheusRule": {"enabled": True, "labels": {"release": "kube-prometheus-stack"}},
    "dashboards": {"enabled": True, "namespace": "monitoring"},
    "dra": {"enabled": True},
    "dcgmCompat": {"enabled": True, "discoveryLabels": True},
    "extraArgs": ["--web.enable-debug", "--no-collect.processes"],
    "extraEnv": [{"name": "TESSERA_LOG_LEVEL", "value": "debug"}],
    "imagePullSecrets": [{"name": "registry-creds"}],
    "image": {"repository": "registry.example.com/tessera", "digest": "sha256:" + "0" * 64},
    "priorityClassName": "system-node-critical",
    "podAnnotations": {"example.com/owner": "gpu-platform"},
    "podLabels": {"team": "gpu-platform"},
    "affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
        "nodeSelectorTerms": [{"matchExpressions": [
            {"key": "nvidia.com/gpu.count", "operator": "Exists"}]}]}}},
    "logLevel": "debug",
    "metricsDetail": "full",
    "serviceAccount": {"annotations": {"example.com/role": "tessera"}},
    "service": {"annotations": {"example.com/scrape": "yes"}},
}
VARIANTS = {
    "device-plugin cluster (no RuntimeClass, no GFD label)": {"runtimeClassName": "", "nodeSelector": None},
    "kubelet source off": {"kubelet": {"enabled": False}},
    "existing service account, no RBAC, no Service": {
        "serviceAccount": {"create": False, "name": "gpu-observer"}, "rbac": {"create": False},
        "service": {"enabled": False}, "podMonitor": {"enabled": True}},
    "other release name": {"__release": "gpu-metrics"},
    "dcgm compat without the second listener": {"dcgmCompat": {"enabled": True, "port": 0}},
}


def docs_of(manifests):
    out = []
    for path, text in sorted(manifests.items()):
        if path.endswith("NOTES.txt"):
            continue
        for d in yaml.safe_load_all(text):
            if d:
                out.append(d)
    return out


def index(docs):
    return {(d["kind"], d["metadata"]["name"]): d for d in docs}


def load(path):
    with open(path, encoding="utf-8") as f:
        return index([d for d in yaml.safe_load_all(f) if d])


def ds_parts(objs):
    ds = next(d for (k, _), d in objs.items() if k == "DaemonSet")
    spec = ds["spec"]["template"]["spec"]
    return ds, spec, spec["containers"][0]


def arch_pinned(spec):
    """Whether a pod spec's node selection names the node architecture label."""
    text = repr({k: spec.get(k) for k in ("nodeSelector", "affinity")})
    return "kubernetes.io/arch" in text


def by_name(items):
    return {i["name"]: i for i in items or []}


def agree(c, chart, base, what):
    """The default render and the kustomize base describe the same exporter."""
    _, cs, cc = ds_parts(chart)
    _, bs, bc = ds_parts(base)
    c.check(cc["image"] == bc["image"], f"{what}: image {cc['image']} == {bc['image']}")
    c.check(cc["args"] == bc["args"], f"{what}: args equal ({len(cc['args'])})")
    c.check(cc.get("env") == bc.get("env"), f"{what}: env equal")
    c.check(cc["ports"] == bc["ports"], f"{what}: container ports equal")
    for probe in ("livenessProbe", "readinessProbe"):
        c.check(cc.get(probe) == bc.get(probe), f"{what}: {probe} equal")
    c.check(cc.get("resources") == bc.get("resources"), f"{what}: resources equal")
    c.check(cc.get("securityContext") == bc.get("securityContext"), f"{what}: container securityContext equal")
    c.check(cs.get("securityContext") == bs.get("securityContext"), f"{what}: pod securityContext equal")
    c.check(cc.get("volumeMounts") == bc.get("volumeMounts"), f"{what}: volumeMounts equal")
    c.check(by_name(cs.get("volumes")) == by_name(bs.get("volumes")), f"{what}: volumes (hostPaths) equal")
    for key in ("hostPID", "runtimeClassName", "nodeSelector", "tolerations", "priorityClassName"):
        c.check(cs.get(key) == bs.get(key), f"{what}: pod {key} equal ({cs.get(key)!r})")
    rules = lambda objs: next(d for (k, _), d in objs.items() if k == "ClusterRole")["rules"]  # noqa: E731
    c.check(rules(chart) == rules(base), f"{what}: ClusterRole rules equal")
    crb = lambda objs: next(d for (k, _), d in objs.items() if k == "ClusterRoleBinding")  # noqa: E731
    c.check(crb(chart)["subjects"] == crb(base)["subjects"] and crb(chart)["roleRef"] == crb(base)["roleRef"],
            f"{what}: ClusterRoleBinding binds the same ServiceAccount to the same role")
    svc = lambda objs: next(d for (k, _), d in objs.items() if k == "Service")["spec"]  # noqa: E731
    c.check(svc(chart)["ports"] == svc(base)["ports"] and svc(chart).get("clusterIP") == "None",
            f"{what}: headless Service with the same ports")


def validate_builtin(c, docs, tag):
    import kubernetes_validate

    for v in K8S_VERSIONS:
        bad = []
        n = 0
        for d in docs:
            if d["kind"] in CRD_KINDS:
                continue
            n += 1
            try:
                kubernetes_validate.validate(d, v, strict=True)
            except Exception as e:  # kubernetes_validate raises several error types
                bad.append(f"{d['kind']}/{d['metadata']['name']}: {str(e).splitlines()[0][:300]}")
        c.check(not bad and n > 0, f"{tag}: kubernetes-validate --strict {v} ({n} objects)")
        for b in bad:
            print(f"      {b}")


def check_crds(c, objs, root, tag):
    sm = objs.get(("ServiceMonitor", "tessera"))
    pm = objs.get(("PodMonitor", "tessera"))
    for kind, mon, key in (("ServiceMonitor", sm, "endpoints"), ("PodMonitor", pm, "podMetricsEndpoints")):
        if mon is None:
            c.fail(f"{tag}: {kind} rendered")
            continue
        ep = mon["spec"][key][0]
        sel = mon["spec"]["selector"]["matchLabels"]
        _, _, ctr = ds_parts(objs)
        ds = next(d for (k, _), d in objs.items() if k == "DaemonSet")
        pod_labels = ds["spec"]["template"]["metadata"]["labels"]
        c.check(ep["port"] == ctr["ports"][0]["name"] and ep["path"] == "/metrics" and ep.get("honorLabels") is True,
                f"{tag}: {kind} scrapes port {ep['port']} /metrics with honorLabels")
        c.check(all(pod_labels.get(k) == v for k, v in sel.items()), f"{tag}: {kind} selector matches the pods")
        c.check(any(r.get("action") == "labeldrop" for r in ep.get("relabelings", [])),
                f"{tag}: {kind} drops the exporter pod's namespace/pod/container")
        c.check(any(r.get("targetLabel") == "node" and r.get("sourceLabels") == ["__meta_kubernetes_pod_node_name"]
                    for r in ep.get("relabelings", [])),
                f"{tag}: {kind} puts `node` on up (deploy/alertmanager's exporter-down inhibition needs it)")
    if sm is not None:
        c.check(sm["metadata"]["labels"].get("release") == "kube-prometheus-stack", f"{tag}: ServiceMonitor extra labels")
        c.check(any(r.get("targetLabel") == "cluster" for r in sm["spec"]["endpoints"][0]["relabelings"]),
                f"{tag}: ServiceMonitor extra relabelings appended")
    rule = objs.get(("PrometheusRule", "tessera"))
    want = []
    for path in sorted(glob.glob(os.path.join(root, "alerts", "*.yaml"))):
        with open(path, encoding="utf-8") as f:
            want += yaml.safe_load(f)["groups"]
    if rule is None:
        c.fail(f"{tag}: PrometheusRule rendered")
    else:
        got = sorted(rule["spec"]["groups"], key=lambda g: g["name"])
        c.check(got == sorted(want, key=lambda g: g["name"]),
                f"{tag}: PrometheusRule groups equal alerts/*.yaml ({len(want)} groups, "
                f"{sum(len(g['rules']) for g in want)} rules)")
    cm = objs.get(("ConfigMap", "tessera-dashboards"))
    if cm is None:
        c.fail(f"{tag}: dashboards ConfigMap rendered")
    else:
        files = {os.path.basename(p): open(p, encoding="utf-8").read()
                 for p in glob.glob(os.path.join(root, "dashboards", "*.json"))}
        c.check(cm["data"] == files, f"{tag}: dashboards ConfigMap holds dashboards/*.json byte for byte ({len(files)})")
        c.check(cm["metadata"]["labels"].get("grafana_dashboard") == "1" and cm["metadata"]["namespace"] == "monitoring",
                f"{tag}: dashboards ConfigMap labelled for the sidecar, in the namespace asked for")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--root", required=True)
    ap.add_argument("--base", required=True)
    ap.add_argument("--dra", required=True)
    ap.add_argument("--help-text")
    a = ap.parse_args()
    c = Checker()
    import helm_python as helm

    chart_dir = os.path.join(a.root, "deploy/helm/tessera")
    sync = subprocess.run([sys.executable, os.path.join(a.root, "deploy/helm/sync-files.py"), "--check"],
                          capture_output=True, text=True)
    c.check(sync.returncode == 0, "chart files/ are current copies of alerts/ and dashboards/ (sync-files.py --check)")
    if sync.returncode:
        print("      " + sync.stderr.strip().replace("\n", "\n      "))

    for tag, values in (("default values", {}), ("every toggle on", ALL_ON)):
        for v in HELM_KUBE_VERSIONS:
            report = helm.lint(chart_dir, values, strict=True, namespace="tessera", kube_version=f"v{v}")
            bad = [m for m in report["messages"] if m["severity"] >= 2] + [{"error": e} for e in report["errors"]]
            c.check(not bad, f"helm lint --strict ({tag}, Kubernetes {v})")
            for m in bad:
                print(f"      {m.get('path', '')}: {m['error']}")

    chart = helm.Chart.load(chart_dir)
    c.check(chart.metadata["appVersion"] == chart.version, "Chart.yaml: version == appVersion (the image tag)")
    renders = {}
    for tag, values in [("default values", {}), ("every toggle on", ALL_ON)] + list(VARIANTS.items()):
        values = copy.deepcopy(values)
        release = dict(RELEASE, name=values.pop("__release", RELEASE["name"]))
        try:
            manifests = chart.render(values, **release)
            docs = docs_of(manifests)
        except (helm.HelmError, yaml.YAMLError) as e:
            c.fail(f"render ({tag}): {e}")
            continue
        renders[tag] = index(docs)
        notes = manifests.get("tessera/templates/NOTES.txt", "")
        c.check(any(d["kind"] == "DaemonSet" for d in docs) and "kubectl" in notes, f"render ({tag}): {len(docs)} objects and NOTES")
        validate_builtin(c, docs, f"render ({tag})")

    base, dra = load(a.base), load(a.dra)
    # Grace Hopper and Grace Blackwell nodes are arm64: one DaemonSet serves a mixed-arch cluster
    # through the image's manifest list, so no render and no overlay may pin its pods to one.
    pinned = [tag for tag, objs in list(renders.items()) + [("kustomize base", base), ("kustomize DRA overlay", dra)]
              if arch_pinned(ds_parts(objs)[1])]
    c.check(not pinned, f"no kubernetes.io/arch pin in {len(renders)} renders and the kustomize base and DRA overlay"
            + (f" (pinned: {pinned})" if pinned else ""))
    if "default values" in renders:
        objs = renders["default values"]
        agree(c, objs, base, "default render vs kustomize base")
        c.check(not any(k in CRD_KINDS or k == "ConfigMap" for k, _ in objs), "default render has no CRD objects or dashboards")
    if "every toggle on" in renders:
        objs = renders["every toggle on"]
        _, spec, ctr = ds_parts(objs)
        _, _, dctr = ds_parts(dra)
        rules = next(d for (k, _), d in objs.items() if k == "ClusterRole")["rules"]
        drules = next(d for (k, _), d in dra.items() if k == "ClusterRole")["rules"]
        c.check(rules == drules, "DRA on: ClusterRole rules equal the DRA overlay's")
        c.check("--kube.dra" in ctr["args"] and "--kube.dra" in dctr["args"], "DRA on: --kube.dra passed, as in the overlay")
        c.check(ctr["args"][-2:] == ALL_ON["extraArgs"], "extraArgs appended last")
        c.check("--metrics.detail=full" in ctr["args"], "metricsDetail full: --metrics.detail=full passed")
        c.check(ctr["image"] == "registry.example.com/tessera@sha256:" + "0" * 64, "image digest wins over tag")
        c.check(spec.get("imagePullSecrets") == ALL_ON["imagePullSecrets"], "imagePullSecrets passed")
        c.check(spec.get("priorityClassName") == "system-node-critical" and "affinity" in spec,
                "priorityClassName and affinity passed")
        check_crds(c, objs, a.root, "every toggle on")
        ds, _, _ = ds_parts(objs)
        svc = objs.get(("Service", "tessera-dcgm"))
        c.check("--metrics.dcgm-compat" in ctr["args"] and "--web.dcgm-listen-address=:9400" in ctr["args"]
                and by_name(ctr["ports"]).get("dcgm", {}).get("containerPort") == 9400,
                "dcgm compat on: flags passed and container port 9400 named dcgm")
        c.check(svc is not None and svc["spec"]["ports"] == [{"name": "metrics", "port": 9400, "targetPort": "dcgm", "protocol": "TCP"}]
                and svc["metadata"]["labels"].get("app.kubernetes.io/name") == "dcgm-exporter"
                and ds["spec"]["template"]["metadata"]["labels"].get("app") == "nvidia-dcgm-exporter"
                and ds["spec"]["selector"]["matchLabels"].get("app.kubernetes.io/name") == "tessera",
                "dcgm compat on: Service tessera-dcgm on 9400 (port metrics) with dcgm-exporter's discovery labels; selector unchanged")
    v = renders.get("device-plugin cluster (no RuntimeClass, no GFD label)")
    if v:
        _, spec, _ = ds_parts(v)
        c.check("runtimeClassName" not in spec and "nodeSelector" not in spec,
                "runtimeClassName=\"\" and nodeSelector=null leave both out")
    v = renders.get("kubelet source off")
    if v:
        _, spec, ctr = ds_parts(v)
        c.check("--kubelet.enabled=false" in ctr["args"] and "pod-resources" not in by_name(spec["volumes"]),
                "kubelet.enabled=false: flag set and no pod-resources mount")
    v = renders.get("existing service account, no RBAC, no Service")
    if v:
        _, spec, _ = ds_parts(v)
        kinds = {k for k, _ in v}
        c.check(spec["serviceAccountName"] == "gpu-observer" and not kinds & {"ServiceAccount", "ClusterRole", "Service"},
                "existing service account used; no ServiceAccount, RBAC or Service rendered")
    v = renders.get("dcgm compat without the second listener")
    if v:
        _, _, ctr = ds_parts(v)
        c.check("--metrics.dcgm-compat" in ctr["args"] and not any("dcgm-listen" in x for x in ctr["args"])
                and ("Service", "tessera-dcgm") not in v and "dcgm" not in by_name(ctr["ports"]),
                "dcgm compat with port 0: compat on /metrics only, no second listener, port or Service")
    v = renders.get("other release name")
    if v:
        c.check(("DaemonSet", "gpu-metrics-tessera") in v, "release gpu-metrics names objects gpu-metrics-tessera (keeps 'tessera' for the alerts' job match)")

    # Each price knob lands in its own rule and nowhere else.
    default = {}
    for path in glob.glob(os.path.join(a.root, "alerts", "*.yaml")):
        with open(path, encoding="utf-8") as f:
            default.update({r["record"]: r["expr"] for g in yaml.safe_load(f)["groups"]
                            for r in g["rules"] if "record" in r})
    for knob, value, record in (("gpuHourPrice", 3.25, "cluster:gpu_hour_price:value"),
                                ("kwhPrice", 0.21, "cluster:gpu_energy_kwh_price:value"),
                                ("gridCarbonIntensity", 56, "cluster:grid_carbon_intensity_grams_per_kwh:value")):
        priced = index(docs_of(chart.render({"prometheusRule": {"enabled": True, knob: value}}, **RELEASE)))
        rule = priced.get(("PrometheusRule", "tessera"))
        exprs = {r["record"]: r["expr"] for g in (rule or {}).get("spec", {}).get("groups", [])
                 for r in g["rules"] if "record" in r}
        changed = sorted(k for k in exprs if exprs[k] != default.get(k))
        c.check(exprs.get(record) == f"vector({value})" and changed == [record],
                f"prometheusRule.{knob}={value} sets {record} to vector({value}) only (changed: {changed})")

    for tag, bad in (("port: \"x\"", {"port": "x"}), ("unknown key", {"imag": {"tag": "1"}}),
                     ("negative GPU-hour price", {"prometheusRule": {"gpuHourPrice": -1}}),
                     ("negative kWh price", {"prometheusRule": {"kwhPrice": -0.1}}),
                     ("carbon intensity not a number", {"prometheusRule": {"gridCarbonIntensity": "low"}}),
                     ("ServiceMonitor without a Service", {"serviceMonitor": {"enabled": True}, "service": {"enabled": False}})):
        try:
            chart.render(bad, **RELEASE)
            c.fail(f"values rejected: {tag}")
        except helm.HelmError as e:
            c.ok(f"values rejected: {tag} ({str(e).splitlines()[0][:120]})")

    tpl = subprocess.run([sys.executable, os.path.join(a.root, "scripts/helm-template.py"), "--set",
                          "dra.enabled=true,prometheusRule.enabled=true"], capture_output=True, text=True, timeout=60)
    kinds = re.findall(r"^kind: (\w+)", tpl.stdout, re.M)
    c.check(tpl.returncode == 0 and "DaemonSet" in kinds and "PrometheusRule" in kinds and "kubectl" in tpl.stderr,
            f"scripts/helm-template.py --set ... renders {len(kinds)} objects (+ NOTES on stderr)")

    if a.help_text:
        with open(a.help_text, encoding="utf-8") as f:
            text = f.read()
        used = set()
        for objs in renders.values():
            _, _, ctr = ds_parts(objs)
            used |= {re.sub(r"^--(no-)?", "--", x.split("=")[0]) for x in ctr["args"]}
        missing = [fl for fl in sorted(used) if not re.search(rf"(?<![\w-]){re.escape(fl)}(?![\w.-])", text)]
        c.check(not missing, f"tessera --help knows every flag the chart passes ({len(used)}){': missing ' + ', '.join(missing) if missing else ''}")

    print(f"test_chart: {c.passed} passed, {c.failed} failed")
    return 1 if c.failed else 0


if __name__ == "__main__":
    sys.exit(main())

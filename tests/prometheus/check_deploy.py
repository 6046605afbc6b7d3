#!/usr/bin/env python3
"""Structural checks of the rendered kustomize overlays against each other
and against the exporter.

    check_deploy.py --root . --base base.yaml --dra dra.yaml \
        --operator prometheus-operator.yaml --probe cuda-probe.yaml [--help-text tessera-help.txt]

(the YAML files are `kubectl kustomize deploy/<overlay>` output.)

Checks: the DaemonSet's flags, ports, probes, mounts, env, security context
and scheduling; that the container port equals the exporter's default listen
port 9949 and the Service/ServiceMonitor port names agree; the pod-resources
hostPath matches --kubelet.pod-resources-socket; RBAC (and the DRA extras);
the ServiceMonitor and PrometheusRule (CRDs: no offline schema, so checked
here) and that the PrometheusRule's groups equal alerts/*.yaml; the
dashboards ConfigMap carries grafana_dashboard: "1" and every
dashboards/*.json byte for byte. With --help-text (the output of
`tessera --help`), every flag used exists and 9949 is the default port.

Prints "ok ..." / "FAIL ..." lines and "check_deploy: N passed, M failed".
"""
import argparse
import glob
import os
import re
import sys

import yaml

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from checker import Checker  # noqa: E402

DEFAULT_PORT = 9949
SOCKET = "/var/lib/kubelet/pod-resources/kubelet.sock"
IMAGE = "ghcr.io/tessera-gpu/tessera:0.1.0"


def load(path):
    with open(path, encoding="utf-8") as f:
        docs = [d for d in yaml.safe_load_all(f) if d]
    return {(d["kind"], d["metadata"]["name"]): d for d in docs}


def flags(container):
    out = {}
    for a in container.get("args", []) + container.get("command", [])[1:]:
        if a.startswith("--"):
            k, _, v = a.partition("=")
            out[k] = v if _ else True
    return out


def check_exporter(c, tag, objs, dra):
    ds = objs.get(("DaemonSet", "tessera"))
    c.check(ds is not None, f"{tag}: DaemonSet tessera")
    if ds is None:
        return None
    spec = ds["spec"]["template"]["spec"]
    ctr = spec["containers"][0]
    f = flags(ctr)
    env = {e["name"]: e for e in ctr.get("env", [])}
    ports = {p["name"]: p for p in ctr.get("ports", [])}
    mounts = {m["name"]: m for m in ctr.get("volumeMounts", [])}
    vols = {v["name"]: v for v in spec.get("volumes", [])}
    listen = f.get("--web.listen-address", "")
    c.check(ctr.get("image") == IMAGE, f"{tag}: image {ctr.get('image')}")
    c.check(listen.rsplit(":", 1)[-1] == str(DEFAULT_PORT), f"{tag}: --web.listen-address {listen} uses the default port {DEFAULT_PORT}")
    c.check(ports.get("metrics", {}).get("containerPort") == DEFAULT_PORT, f"{tag}: container port 'metrics' = {DEFAULT_PORT}")
    for probe, path in (("livenessProbe", "/healthz"), ("readinessProbe", "/readyz")):
        g = ctr.get(probe, {}).get("httpGet", {})
        c.check(g.get("path") == path and g.get("port") in ("metrics", DEFAULT_PORT), f"{tag}: {probe} GET {path} on the metrics port")
    sock = f.get("--kubelet.pod-resources-socket")
    sockdir = os.path.dirname(sock) if isinstance(sock, str) else None
    pr_vol = [n for n, v in vols.items() if v.get("hostPath", {}).get("path") == sockdir]
    c.check(sock == SOCKET, f"{tag}: --kubelet.pod-resources-socket={sock}")
    c.check(bool(pr_vol) and mounts.get(pr_vol[0], {}).get("mountPath") == sockdir and mounts[pr_vol[0]].get("readOnly") is True,
            f"{tag}: hostPath {sockdir} mounted read-only at the socket's directory")
    procfs = f.get("--path.procfs")
    proc_vol = [n for n, v in vols.items() if v.get("hostPath", {}).get("path") == "/proc"]
    c.check(procfs == "/host/proc" and bool(proc_vol) and mounts.get(proc_vol[0], {}).get("mountPath") == procfs
            and mounts[proc_vol[0]].get("readOnly") is True, f"{tag}: host /proc read-only at --path.procfs={procfs}")
    c.check(spec.get("hostPID") is True, f"{tag}: hostPID")
    c.check(spec.get("runtimeClassName") == "nvidia", f"{tag}: runtimeClassName nvidia")
    c.check(env.get("NVIDIA_VISIBLE_DEVICES", {}).get("value") == "all" and env.get("NVIDIA_DRIVER_CAPABILITIES", {}).get("value") == "utility",
            f"{tag}: NVIDIA_VISIBLE_DEVICES=all, NVIDIA_DRIVER_CAPABILITIES=utility")
    res = ctr.get("resources", {})
    gpu_req = [k for part in ("requests", "limits") for k in res.get(part, {}) if "nvidia.com" in k]
    c.check(not gpu_req, f"{tag}: requests no GPU resource")
    c.check(set(res.get("requests", {})) >= {"cpu", "memory"} and set(res.get("limits", {})) >= {"cpu", "memory"}, f"{tag}: cpu/memory requests and limits")
    node_env = env.get("NODE_NAME", {}).get("valueFrom", {}).get("fieldRef", {}).get("fieldPath")
    c.check(node_env == "spec.nodeName" and (env.get("TESSERA_KUBE_NODE_NAME", {}).get("value") == "$(NODE_NAME)" or f.get("--kube.node-name") == "$(NODE_NAME)"),
            f"{tag}: node name from the downward API (NODE_NAME -> TESSERA_KUBE_NODE_NAME)")
    c.check(f.get("--log.format") == "json" and f.get("--kube.pod-labels") == "app.kubernetes.io/name,team", f"{tag}: --log.format=json --kube.pod-labels")
    c.check((f.get("--kube.dra") is True) == dra, f"{tag}: --kube.dra {'set' if dra else 'absent'}")
    sc, psc = ctr.get("securityContext", {}), spec.get("securityContext", {})
    c.check(sc.get("readOnlyRootFilesystem") is True and sc.get("allowPrivilegeEscalation") is False
            and sc.get("capabilities", {}).get("drop") == ["ALL"] and not sc.get("capabilities", {}).get("add")
            and not sc.get("privileged"), f"{tag}: read-only root fs, no privilege escalation, all capabilities dropped")
    seccomp = (sc.get("seccompProfile") or psc.get("seccompProfile") or {}).get("type")
    c.check(seccomp == "RuntimeDefault", f"{tag}: seccomp RuntimeDefault")
    c.check(spec.get("nodeSelector", {}).get("nvidia.com/gpu.present") == "true", f"{tag}: nodeSelector nvidia.com/gpu.present=true")
    c.check(any(t.get("key") == "nvidia.com/gpu" for t in spec.get("tolerations", [])), f"{tag}: tolerates nvidia.com/gpu taints")
    sa = spec.get("serviceAccountName")
    c.check(("ServiceAccount", sa) in objs, f"{tag}: ServiceAccount {sa} exists")
    crb = objs.get(("ClusterRoleBinding", "tessera"), {})
    subj = (crb.get("subjects") or [{}])[0]
    c.check(subj.get("name") == sa and subj.get("namespace") == ds["metadata"].get("namespace")
            and ("ClusterRole", crb.get("roleRef", {}).get("name")) in objs, f"{tag}: ClusterRoleBinding binds {sa} in its namespace")
    rules = objs.get(("ClusterRole", "tessera"), {}).get("rules", [])

    def allowed(group, resource, verb):
        return any(group in r.get("apiGroups", []) and resource in r.get("resources", []) and verb in r.get("verbs", []) for r in rules)
    # Exactly what tessera uses (scripts/test-kube-real.sh proves each verb needed on a real server).
    c.check(all(allowed("", "pods", v) for v in ("list", "watch")) and allowed("", "nodes", "get")
            and not any(allowed("", "nodes", v) for v in ("list", "watch")),
            f"{tag}: RBAC pods list/watch, nodes get only")
    c.check(allowed("resource.k8s.io", "resourceslices", "list") == dra
            and not allowed("resource.k8s.io", "resourceslices", "watch"),
            f"{tag}: RBAC resourceslices list {'granted' if dra else 'not granted'}, never watch")
    c.check(not any("*" in r.get("verbs", []) or any(v in r.get("verbs", []) for v in ("create", "update", "patch", "delete")) for r in rules),
            f"{tag}: RBAC is read-only")
    svc = objs.get(("Service", "tessera"), {})
    sp = {p["name"]: p for p in svc.get("spec", {}).get("ports", [])}
    pod_labels = ds["spec"]["template"]["metadata"]["labels"]
    c.check(svc.get("spec", {}).get("clusterIP") == "None", f"{tag}: Service is headless")
    c.check("metrics" in sp and sp["metrics"].get("targetPort") in ("metrics", DEFAULT_PORT) and sp["metrics"].get("port") == DEFAULT_PORT,
            f"{tag}: Service port 'metrics' {DEFAULT_PORT} -> container port metrics")
    sel = svc.get("spec", {}).get("selector", {})
    c.check(sel and all(pod_labels.get(k) == v for k, v in sel.items()), f"{tag}: Service selects the DaemonSet's pods")
    ns = objs.get(("Namespace", ds["metadata"].get("namespace")))
    c.check(ns is not None and ns["metadata"]["labels"].get("pod-security.kubernetes.io/enforce") == "privileged",
            f"{tag}: namespace {ds['metadata'].get('namespace')} exists and admits hostPID/hostPath pods")
    return {"flags": f, "svc": svc, "ns": ds["metadata"].get("namespace")}


def check_operator(c, root, objs, info):
    sm = objs.get(("ServiceMonitor", "tessera"))
    c.check(sm is not None and sm.get("apiVersion") == "monitoring.coreos.com/v1", "operator: ServiceMonitor monitoring.coreos.com/v1")
    if sm:
        eps = sm["spec"].get("endpoints", [])
        svc = info["svc"]
        svc_ports = {p["name"] for p in svc["spec"]["ports"]}
        c.check(bool(eps) and all(e.get("port") in svc_ports for e in eps), f"operator: ServiceMonitor port {[e.get('port') for e in eps]} is a Service port name {sorted(svc_ports)}")
        sel = sm["spec"].get("selector", {}).get("matchLabels", {})
        c.check(sel and all(svc["metadata"]["labels"].get(k) == v for k, v in sel.items()), "operator: ServiceMonitor selects the Service")
        c.check(sm["metadata"].get("namespace") == info["ns"] or sm["spec"].get("namespaceSelector"), "operator: ServiceMonitor in the Service's namespace")
        c.check(all(e.get("path", "/metrics") == "/metrics" for e in eps), "operator: ServiceMonitor scrapes /metrics")
        c.check(all(any(r.get("targetLabel") == "node" and r.get("sourceLabels") == ["__meta_kubernetes_pod_node_name"]
                        for r in e.get("relabelings", [])) for e in eps),
                "operator: ServiceMonitor puts `node` on up (deploy/alertmanager's exporter-down inhibition needs it)")
    pr = objs.get(("PrometheusRule", "tessera"))
    c.check(pr is not None and pr.get("apiVersion") == "monitoring.coreos.com/v1", "operator: PrometheusRule monitoring.coreos.com/v1")
    if pr:
        groups = pr.get("spec", {}).get("groups")
        want = []
        wrapped = ("tessera-recording.yaml", "tessera-alerts.yaml", "tessera-limits.yaml",
                   "tessera-advisor.yaml")
        for path in (os.path.join(root, "alerts", n) for n in wrapped):
            with open(path, encoding="utf-8") as f:
                want += yaml.safe_load(f)["groups"]
        extra = sorted(set(glob.glob(os.path.join(root, "alerts", "*.yaml"))) - {os.path.join(root, "alerts", n) for n in wrapped})
        c.check(not extra, f"operator: alerts/ holds only the wrapped rule files {extra if extra else ''}")
        c.check(groups == want, f"operator: PrometheusRule spec.groups equal alerts/*.yaml ({len(want)} groups)")
        for g in groups or []:
            for r in g.get("rules", []):
                if not (("alert" in r) ^ ("record" in r)) or "expr" not in r:
                    c.check(False, f"operator: PrometheusRule rule shape {r}")
                    break
        c.check(pr["metadata"].get("namespace") == info["ns"], "operator: PrometheusRule namespaced with the exporter")
    cms = [o for (k, _), o in objs.items() if k == "ConfigMap" and o["metadata"].get("labels", {}).get("grafana_dashboard") == "1"]
    c.check(len(cms) == 1, "operator: one ConfigMap labelled grafana_dashboard: \"1\"")
    if cms:
        data = cms[0].get("data", {})
        files = sorted(glob.glob(os.path.join(root, "dashboards", "*.json")))
        same = True
        for path in files:
            with open(path, encoding="utf-8") as f:
                same &= data.get(os.path.basename(path)) == f.read()
        c.check(same and len(data) == len(files), f"operator: dashboards ConfigMap holds all {len(files)} dashboards/*.json verbatim")


def check_probe(c, objs, info):
    """The cuda-probe overlay: the exporter listens where the policy mounts the socket, the
    init container installs the library where the policy mounts it, and the policy sets
    CUDA_INJECTION64_PATH to that library, read-only, for GPU containers only."""
    ds = objs[("DaemonSet", "tessera")]
    spec = ds["spec"]["template"]["spec"]
    ctr = spec["containers"][0]
    vols = {v["name"]: v.get("hostPath", {}).get("path") for v in spec.get("volumes", [])}
    sock = info["flags"].get("--probe.socket")
    sockdir = os.path.dirname(sock) if isinstance(sock, str) else None
    mounted = {m["mountPath"]: vols.get(m["name"]) for m in ctr.get("volumeMounts", [])}
    c.check(sockdir is not None and mounted.get(sockdir) == sockdir and sockdir.startswith("/run/"),
            f"probe: --probe.socket={sock} lies in hostPath {sockdir} mounted at the same path")
    init = (spec.get("initContainers") or [{}])[0]
    args = init.get("args", [])
    lib_mount = {m["mountPath"]: vols.get(m["name"]) for m in init.get("volumeMounts", [])}
    libdir = lib_mount.get(args[1]) if len(args) == 2 else None
    c.check(args[:1] == ["install-probe"] and init.get("image") == IMAGE and libdir is not None,
            f"probe: init container runs `tessera install-probe` into hostPath {libdir}")
    isc = init.get("securityContext", {})
    c.check(isc.get("readOnlyRootFilesystem") is True and isc.get("capabilities", {}).get("drop") == ["ALL"],
            "probe: init container read-only, all capabilities dropped")
    pol = objs.get(("MutatingAdmissionPolicy", "tessera-cuda-probe"), {})
    binding = objs.get(("MutatingAdmissionPolicyBinding", "tessera-cuda-probe"), {})
    c.check(binding.get("spec", {}).get("policyName") == "tessera-cuda-probe"
            and binding["spec"].get("matchResources", {}).get("namespaceSelector", {}).get("matchLabels") == {"tessera.dev/cuda-probe": "enabled"},
            "probe: binding applies the policy to namespaces labelled tessera.dev/cuda-probe=enabled")
    spec_p = pol.get("spec", {})
    c.check(spec_p.get("failurePolicy") == "Ignore", "probe: a failed mutation never blocks a workload")
    conds = " ".join(m.get("expression", "") for m in spec_p.get("matchConditions", []))
    c.check("'disabled'" in conds and "nvidia.com/" in conds, "probe: pods can opt out; only GPU pods are matched")
    expr = " ".join(m.get("applyConfiguration", {}).get("expression", "") for m in spec_p.get("mutations", []))
    c.check(f'path: "{libdir}"' in expr and f'path: "{sockdir}"' in expr,
            f"probe: the policy mounts the same host paths ({libdir}, {sockdir})")
    c.check(f'value: "{libdir}/libtessera_probe.so"' in expr and "CUDA_INJECTION64_PATH" in expr,
            "probe: CUDA_INJECTION64_PATH names the installed library")
    c.check(expr.count("readOnly: true") == 2, "probe: both mounts are read-only in the workload")


def check_help(c, text, used):
    for flag in sorted(used):
        c.check(re.search(rf"(?<![\w-]){re.escape(flag)}(?![\w-])", text) is not None, f"exporter --help knows {flag}")
    c.check(re.search(r"9949", text) is not None, "exporter --help shows the default port 9949")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--root", default=".")
    ap.add_argument("--base", required=True)
    ap.add_argument("--dra", required=True)
    ap.add_argument("--operator", required=True)
    ap.add_argument("--probe", required=True)
    ap.add_argument("--help-text")
    a = ap.parse_args()
    c = Checker()
    base = check_exporter(c, "base", load(a.base), dra=False)
    dra = check_exporter(c, "dra", load(a.dra), dra=True)
    ops = load(a.operator)
    info = check_exporter(c, "operator", ops, dra=False)
    if info:
        check_operator(c, a.root, ops, info)
    probe_objs = load(a.probe)
    probe = check_exporter(c, "cuda-probe", probe_objs, dra=False)
    if probe:
        check_probe(c, probe_objs, probe)
    if a.help_text:
        with open(a.help_text, encoding="utf-8") as f:
            text = f.read()
        used = set()
        for x in (base, dra, info, probe):
            if x:
                used |= set(x["flags"])
        check_help(c, text, used)
    print(f"check_deploy: {c.passed} passed, {c.failed} failed")
    return 1 if c.failed else 0


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/env python3
"""The cuda-probe overlay's MutatingAdmissionPolicy, applied to a real kube-apiserver (KUBECONFIG
names it; scripts/test-kube-real.sh) and evaluated by its CEL on real pod creations:

  - the whole overlay passes the server's validation (server-side dry run);
  - in a namespace labelled tessera.dev/cuda-probe=enabled, GPU containers get the probe's
    volumes, read-only mounts and CUDA_INJECTION64_PATH; other containers get nothing;
  - a pod labelled tessera.dev/cuda-probe=disabled, a pod in an unlabelled namespace and a pod
    with no GPU container are left alone;
  - a GPU container that already sets CUDA_INJECTION64_PATH keeps its own value, once.

Ends with "check_admission: N passed, N failed".
"""
import json
import subprocess
import sys
import time
import uuid

import yaml

LIB = "/opt/tessera/lib/libtessera_probe.so"
ENV = "CUDA_INJECTION64_PATH"
results = {"passed": 0, "failed": 0}


def kubectl(*args, stdin=None, check=True):
    p = subprocess.run(["kubectl", *args], input=stdin, capture_output=True, text=True)
    if check and p.returncode != 0:
        raise RuntimeError(f"kubectl {' '.join(args)}: {p.stderr.strip()}")
    return p


def check(name, ok, detail=""):
    if ok:
        results["passed"] += 1
        print(f"ok {name}")
    else:
        results["failed"] += 1
        print(f"FAIL {name}: {detail}")


def container(name, gpu=False, env=None):
    c = {"name": name, "image": "registry.invalid/app:1"}
    if gpu:
        c["resources"] = {"limits": {"nvidia.com/gpu": "1"}}
    if env:
        c["env"] = env
    return c


def create_pod(ns, containers, labels=None):
    name = f"p-{uuid.uuid4().hex[:8]}"
    pod = {"apiVersion": "v1", "kind": "Pod",
           "metadata": {"name": name, "namespace": ns, "labels": labels or {}},
           "spec": {"containers": containers}}
    out = kubectl("create", "-o", "json", "-f", "-", stdin=json.dumps(pod))
    return json.loads(out.stdout)


def probe_volumes(pod):
    return sorted(v["name"] for v in pod["spec"].get("volumes", []) if v["name"].startswith("tessera-probe"))


def by_name(pod):
    return {c["name"]: c for c in pod["spec"]["containers"]}


def injected(c):
    env = [e for e in c.get("env", []) if e["name"] == ENV]
    mounts = {m["mountPath"]: m for m in c.get("volumeMounts", []) if m["name"].startswith("tessera-probe")}
    return env, mounts


def main():
    overlay = kubectl("kustomize", "deploy/overlays/cuda-probe").stdout
    # Before 1.36 the API is v1beta1: apply the overlay as its comment tells those clusters to.
    v1_has_map = "mutatingadmissionpolicies" in kubectl(
        "get", "--raw", "/apis/admissionregistration.k8s.io/v1").stdout
    def unexpected(stderr):
        # On such a server the beta API's own deprecation notice is expected, nothing else.
        return "\n".join(line for line in stderr.strip().splitlines()
                         if v1_has_map or "v1beta1 MutatingAdmissionPolicy" not in line)

    if not v1_has_map:
        print("(this server serves MutatingAdmissionPolicy as v1beta1 only: applying the overlay as v1beta1)")
        overlay = overlay.replace("apiVersion: admissionregistration.k8s.io/v1\n",
                                  "apiVersion: admissionregistration.k8s.io/v1beta1\n")
    docs = [d for d in yaml.safe_load_all(overlay) if d]
    # Forced: the DRA overlay's ClusterRole, applied by the same name, has other field managers.
    p = kubectl("apply", "--server-side", "--force-conflicts", "--dry-run=server", "-f", "-", stdin=overlay,
                check=False)
    check("the cuda-probe overlay passes the server's validation, without warnings (dry run)",
          p.returncode == 0 and not unexpected(p.stderr), p.stderr.strip())
    policy = [d for d in docs if d["kind"].startswith("MutatingAdmissionPolicy")]
    check("the overlay holds the policy and its binding", len(policy) == 2, [d["kind"] for d in docs])
    p = kubectl("apply", "--server-side", "-f", "-", stdin=yaml.safe_dump_all(policy), check=False)
    check("the policy and binding are accepted (CEL type-checked by the server)", p.returncode == 0, p.stderr.strip())
    if p.returncode != 0:
        return
    warnings = unexpected(p.stderr)
    check("the server reports no warning on the policy", warnings == "", warnings)

    on, off = "probe-on", "probe-off"
    for ns in (on, off):
        kubectl("create", "namespace", ns, check=False)
    kubectl("label", "--overwrite", "namespace", on, "tessera.dev/cuda-probe=enabled")

    # The policy reaches the admission chain through an informer: wait until it mutates.
    deadline = time.time() + 60
    first = None
    while time.time() < deadline:
        first = create_pod(on, [container("cuda", gpu=True)])
        if probe_volumes(first):
            break
        time.sleep(1)
    check("a GPU pod in an opted-in namespace is mutated within 60 s", first and probe_volumes(first),
          json.dumps(first and first["spec"]))

    pod = create_pod(on, [container("cuda", gpu=True), container("sidecar")])
    cs = by_name(pod)
    env, mounts = injected(cs["cuda"])
    check("opted in: both probe volumes added", probe_volumes(pod) == ["tessera-probe", "tessera-probe-socket"],
          pod["spec"].get("volumes"))
    vols = {v["name"]: v for v in pod["spec"].get("volumes", [])}
    check("opted in: the volumes are the library and socket host directories",
          vols.get("tessera-probe", {}).get("hostPath", {}).get("path") == "/opt/tessera/lib"
          and vols.get("tessera-probe-socket", {}).get("hostPath", {}).get("path") == "/run/tessera", vols)
    check("opted in: the GPU container gets CUDA_INJECTION64_PATH once",
          [e.get("value") for e in env] == [LIB], cs["cuda"].get("env"))
    check("opted in: the GPU container mounts both read-only",
          sorted(mounts) == ["/opt/tessera/lib", "/run/tessera"]
          and all(m.get("readOnly") for m in mounts.values()), cs["cuda"].get("volumeMounts"))
    env, mounts = injected(cs["sidecar"])
    check("opted in: the container without a GPU is left alone", not env and not mounts, cs["sidecar"])

    pod = create_pod(on, [container("cuda", gpu=True)], labels={"tessera.dev/cuda-probe": "disabled"})
    env, mounts = injected(by_name(pod)["cuda"])
    check("a pod labelled tessera.dev/cuda-probe=disabled is left alone",
          not probe_volumes(pod) and not env and not mounts, pod["spec"])

    pod = create_pod(off, [container("cuda", gpu=True)])
    env, mounts = injected(by_name(pod)["cuda"])
    check("a pod in an unlabelled namespace is left alone", not probe_volumes(pod) and not env and not mounts,
          pod["spec"])

    pod = create_pod(on, [container("web")])
    check("a pod without a GPU container is left alone", not probe_volumes(pod) and not injected(by_name(pod)["web"])[0],
          pod["spec"])

    own = "/opt/profiler/libinject.so"
    pod = create_pod(on, [container("cuda", gpu=True, env=[{"name": ENV, "value": own}]),
                          container("cuda2", gpu=True)])
    cs = by_name(pod)
    env, _ = injected(cs["cuda"])
    check("a container that sets CUDA_INJECTION64_PATH keeps its own, not doubled",
          [e.get("value") for e in env] == [own], cs["cuda"].get("env"))
    env, mounts = injected(cs["cuda2"])
    check("... while the pod's other GPU container still gets the probe",
          [e.get("value") for e in env] == [LIB] and len(mounts) == 2, cs["cuda2"])


if __name__ == "__main__":
    try:
        main()
    except Exception as e:  # a crash is one more failure, reported, not a missing summary
        check("check_admission ran to the end", False, repr(e))
    print(f"check_admission: {results['passed']} passed, {results['failed']} failed")
    sys.exit(1 if results["failed"] else 0)

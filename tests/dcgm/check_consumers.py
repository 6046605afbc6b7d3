#!/usr/bin/env python3
"""dcgm-exporter's consumers' own queries against tessera --demo --metrics.dcgm-compat.

Run by scripts/test-dcgm-compat.sh against a real Prometheus that scrapes the demo twice: the
main listener with honor_labels: true (--honor-job) and the DCGM-only listener without
(--plain-job). Both jobs carry the exporter pod's own namespace/pod/container as target labels,
as Kubernetes service discovery gives them.

Every query is evaluated at one instant (the newest scrape both jobs have), so the compat series
and tessera's own families compared come from the same samples. Prints ok/FAIL/note lines and
"check_consumers: N passed, M failed".
"""

import argparse
import json
import re
import sys
import time
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path

import yaml

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "prometheus"))
from checker import Checker  # noqa: E402

MIB = 1024.0 * 1024.0
# Pod labels of the compat series, and what Prometheus renames them to without honor_labels.
POD_LABELS = ("container", "namespace", "pod")
# Devices one holder has to itself (the tenant rule's "exclusive" column).
EXCLUSIVE = {"exclusive", "mig", "vgpu"}
# Rounding: the exposition prints shortest round-trip floats; the remainder is rounded to 1e-9.
EPS = 1e-6

# For each additive field, tessera's own device family (and its factor to the DCGM unit), whole
# GPU and MIG instance; None where tessera has no family of its own for it, so only the split's
# consistency can be checked. Every additive field of docs/metrics.md must be listed here.
DEVICE_FAMILY = {
    "DCGM_FI_DEV_GPU_UTIL": (("gpu_utilization_ratio", 100.0), None),
    "DCGM_FI_DEV_MEM_COPY_UTIL": (("gpu_memory_utilization_ratio", 100.0), None),
    "DCGM_FI_DEV_ENC_UTIL": (("gpu_encoder_utilization_ratio", 100.0), None),
    "DCGM_FI_DEV_DEC_UTIL": (("gpu_decoder_utilization_ratio", 100.0), None),
    "DCGM_FI_DEV_FB_USED": (
        ("gpu_memory_used_bytes", 1 / MIB),
        ("gpu_mig_instance_memory_used_bytes", 1 / MIB),
    ),
    "DCGM_FI_PROF_GR_ENGINE_ACTIVE": (
        ("gpu_utilization_ratio", 1.0),
        ("gpu_mig_instance_sm_activity_ratio", 1.0),
    ),
    "DCGM_FI_PROF_SM_ACTIVE": (
        ("gpu_sm_activity_ratio", 1.0),
        ("gpu_mig_instance_sm_activity_ratio", 1.0),
    ),
    "DCGM_FI_PROF_SM_OCCUPANCY": (
        ("gpu_sm_occupancy_ratio", 1.0),
        ("gpu_mig_instance_sm_occupancy_ratio", 1.0),
    ),
    "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE": (
        ("gpu_tensor_activity_ratio", 1.0),
        ("gpu_mig_instance_tensor_activity_ratio", 1.0),
    ),
    "DCGM_FI_PROF_DRAM_ACTIVE": (
        ("gpu_dram_bandwidth_utilization_ratio", 1.0),
        ("gpu_mig_instance_dram_bandwidth_utilization_ratio", 1.0),
    ),
    # Derived below from gpu_memory_{total,used,reserved}_bytes and the MIG instance families.
    "DCGM_FI_DEV_FB_FREE": (("derived", 1.0), ("derived", 1.0)),
    "DCGM_FI_PROF_PIPE_FP64_ACTIVE": (None, None),
    "DCGM_FI_PROF_PIPE_FP32_ACTIVE": (None, None),
    "DCGM_FI_PROF_PIPE_FP16_ACTIVE": (None, None),
    "DCGM_FI_PROF_PCIE_TX_BYTES": (None, None),
    "DCGM_FI_PROF_PCIE_RX_BYTES": (None, None),
    "DCGM_FI_PROF_NVLINK_TX_BYTES": (None, None),
    "DCGM_FI_PROF_NVLINK_RX_BYTES": (None, None),
}

# Additive fields whose per-tenant figure is one of tessera's container families (and its factor);
# every other additive field has no tenant series on a shared device.
TENANT_FAMILY = {
    "DCGM_FI_PROF_GR_ENGINE_ACTIVE": ("gpu_container_sm_utilization_ratio", 1.0, "any"),
    "DCGM_FI_DEV_GPU_UTIL": ("gpu_container_sm_utilization_ratio", 100.0, "whole"),
    "DCGM_FI_DEV_FB_USED": ("gpu_container_memory_used_bytes", 1 / MIB, "any"),
    "DCGM_FI_PROF_SM_ACTIVE": ("gpu_container_sm_utilization_ratio", 1.0, "mig"),
}
# Additive fields whose tenant figure is derived from another compat field, not a tessera family:
# FB_FREE is split in proportion to FB_USED (checked by the memory-ratio check).
PAIRED = {"DCGM_FI_DEV_FB_FREE"}
# Additive fields whose MIG instances' values are parts of the GPU's: on a MIG GPU they also have
# a row for memory outside every instance (no GPU_I_ID), and their sum by UUID alone is the GPU's.
PARTS_OF_THE_GPU = {"DCGM_FI_DEV_FB_USED", "DCGM_FI_DEV_FB_FREE"}


class Prom:
    def __init__(self, url):
        self.url = url.rstrip("/")
        self.at = None

    def get(self, path, **params):
        q = urllib.parse.urlencode(params, doseq=True)
        try:
            with urllib.request.urlopen(f"{self.url}{path}?{q}", timeout=10) as r:
                body = json.load(r)
        except urllib.error.HTTPError as e:
            raise RuntimeError(f"{params.get('query', path)}: {e.read().decode(errors='replace')}") from None
        if body.get("status") != "success":
            raise RuntimeError(f"{path} {params}: {body}")
        return body["data"]

    def query(self, expr):
        params = {"query": expr}
        if self.at is not None:
            params["time"] = f"{self.at:.3f}"
        data = self.get("/api/v1/query", **params)
        if data["resultType"] == "scalar":
            return [({}, float(data["result"][1]))]
        return [(r["metric"], float(r["value"][1])) for r in data["result"]]


def close(a, b, rel=1e-6):
    return abs(a - b) <= max(EPS, rel * max(abs(a), abs(b)))


def device_key(m):
    """A compat series' device: (UUID, GPU_I_ID); GPU_I_ID is empty on a whole GPU."""
    return (m.get("UUID", ""), m.get("GPU_I_ID", ""))


def pod_of(m, prefix=""):
    return tuple(m.get(prefix + k, "") for k in POD_LABELS)


def additive_fields(metrics_doc):
    """The compat fields docs/metrics.md (generated from crates/exporter/src/metrics/dcgm/fields.rs) calls additive."""
    out = []
    for line in Path(metrics_doc).read_text().splitlines():
        m = re.match(r"^\| `(DCGM_FI_[A-Z0-9_]+)` \| [a-z]+ \| [^|]+ \| additive \|", line)
        if m:
            out.append(m.group(1))
    return out


def fill(expr, **vals):
    for k, v in vals.items():
        expr = expr.replace("{" + k + "}", v)
    return expr


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--prom", required=True)
    ap.add_argument("--queries", required=True)
    ap.add_argument("--metrics-doc", required=True)
    ap.add_argument("--honor-job", required=True)
    ap.add_argument("--plain-job", required=True)
    ap.add_argument("--exporter-pod", required=True, help="namespace/pod of the exporter target")
    ap.add_argument("--window", default="10s")
    args = ap.parse_args()

    c = Checker()
    prom = Prom(args.prom)
    spec = yaml.safe_load(Path(args.queries).read_text())
    honor, plain, w = args.honor_job, args.plain_job, args.window
    exp_ns, exp_pod = args.exporter_pod.split("/", 1)
    exporter = ("tessera", exp_ns, exp_pod)

    # One instant for every query: the older of the two jobs' newest scrapes.
    last = prom.query("min(timestamp(up))")
    prom.at = last[0][1] if last else time.time()

    # --- the node as tessera sees it ------------------------------------------------------------
    gpus = {m["gpu"]: m for m, _ in prom.query(f'gpu_info{{job="{honor}"}}')}
    mig_gpus = {g for g, m in gpus.items() if m.get("mig_mode") == "enabled"}
    c.check(
        len(gpus) >= 2 and mig_gpus and mig_gpus != set(gpus),
        f"demo node: {len(gpus)} GPUs from gpu_info, MIG on {sorted(mig_gpus)}",
    )

    additive = additive_fields(args.metrics_doc)
    c.check(
        set(additive) == set(DEVICE_FAMILY),
        f"the {len(additive)} additive fields of {args.metrics_doc} are the ones this checker knows"
        + (f"; differ: {sorted(set(additive) ^ set(DEVICE_FAMILY))}" if set(additive) != set(DEVICE_FAMILY) else ""),
    )

    # --- NVIDIA's dashboard --------------------------------------------------------------------
    dash = spec["dashboard"]
    absent = {
        title: set(gpus) if a["gpus"] == "all" else (mig_gpus if a["gpus"] == "mig" else set(a["gpus"]))
        for title, a in (dash.get("absent_on") or {}).items()
    }
    for job in (honor, plain):
        inst = prom.query(f'count by (instance) (DCGM_FI_DEV_GPU_TEMP{{job="{job}"}})')
        gpu_vals = prom.query(f'count by (gpu) (DCGM_FI_DEV_GPU_TEMP{{job="{job}"}})')
        seen = {m["gpu"] for m, _ in gpu_vals}
        c.check(
            len(inst) == 1 and seen == set(gpus),
            f"[{job}] dashboard variables: label_values(DCGM_FI_DEV_GPU_TEMP, instance) = "
            f"{[m['instance'] for m, _ in inst]}, label_values(…, gpu) = every GPU ({len(seen)})",
        )
        if len(inst) != 1:
            continue
        # Grafana escapes a regex variable's value and PromQL's string then needs the \\ doubled.
        instance = re.escape(inst[0][0]["instance"]).replace("\\", "\\\\")
        for panel in dash["panels"]:
            title, expr = panel["title"], panel["expr"]
            miss_expected = absent.get(title, set())
            got, missing, unexpected = set(), [], []
            for g in sorted(gpus, key=int):
                q = expr.replace("$instance", instance).replace("$gpu", g)
                if prom.query(q):
                    got.add(g)
                    if g in miss_expected:
                        unexpected.append(g)
                elif g not in miss_expected:
                    missing.append(g)
            # "All" with several values, as Grafana expands it: one regex alternation.
            all_re = "(" + "|".join(sorted(gpus, key=int)) + ")"
            q_all = expr.replace("$instance", instance).replace("$gpu", all_re)
            res_all = prom.query(q_all)
            gpus_all = {m.get("gpu") for m, _ in res_all if "gpu" in m}
            all_ok = bool(res_all) and (not gpus_all or gpus_all == set(gpus) - miss_expected)
            why = (dash.get("absent_on") or {}).get(title, {}).get("why", "")
            c.check(
                not missing and not unexpected and all_ok,
                f"[{job}] panel {title!r}: data for every GPU"
                + (f" but {sorted(miss_expected, key=int)} ({why})" if miss_expected else "")
                + (f"; MISSING on {missing}" if missing else "")
                + (f"; listed as absent but present on {unexpected}" if unexpected else "")
                + ("" if all_ok else f"; 'All' gave GPUs {sorted(gpus_all)}"),
            )

    # --- tessera's own figures, from the same samples -----------------------------------------
    def tessera(family, job=honor):
        return prom.query(f'{family}{{job="{job}"}}')

    holders = {}  # (uuid, mig_uuid) -> [(container, namespace, pod)]
    for m, _ in tessera("gpu_container_memory_used_bytes"):
        holders.setdefault((m["uuid"], m.get("mig_uuid", "")), []).append(pod_of(m))
    mig_ids = {}  # mig_uuid -> (uuid, gpu_instance_id)
    for m, _ in tessera("gpu_mig_instance_info"):
        mig_ids[m["mig_uuid"]] = (m["uuid"], m["gpu_instance_id"])

    def tenant_figures(family, factor, where):
        """(UUID, GPU_I_ID, container, namespace, pod) -> tessera's figure in the DCGM unit."""
        out = {}
        for m, v in tessera(family):
            mig = m.get("mig_uuid", "")
            if (where == "mig" and not mig) or (where == "whole" and mig):
                continue
            uuid, gi = mig_ids.get(mig, (m["uuid"], "")) if mig else (m["uuid"], "")
            out[(uuid, gi) + pod_of(m)] = v * factor
        return out

    # --- OpenCost --------------------------------------------------------------------------------
    oc = spec["opencost"]
    cluster = "cluster_id"
    usage = {}
    for name, agg in (("usage_avg", "avg"), ("usage_max", "max")):
        q = fill(oc[name], window=w, cluster=cluster, filter="")
        rows = {pod_of(m): v for m, v in prom.query(q)}
        usage[name] = rows
        # tessera's per-container figure, put through the same aggregation over the same window.
        want_q = (
            f'{agg}({agg}_over_time(gpu_container_sm_utilization_ratio{{job="{honor}"}}[{w}])) '
            f"by (container, pod, namespace)"
        )
        # Only the containers whose figures the compat surface publishes (docs/metrics.md, "Which
        # tenant figures are published"): sole holders, and tenants of devices where every
        # process carries the probe. The others' figures exist only by elimination.
        expected = set(oc["usage_pods"])
        want = {pod_of(m): v for m, v in prom.query(want_q) if pod_of(m)[2] in expected}
        # OpenCost reads every job: the plain job's series all carry the exporter pod's labels.
        rows_honor = {k: v for k, v in rows.items() if k != exporter}
        bad = [
            f"{k}: {rows_honor.get(k)} vs tessera {want.get(k)}"
            for k in sorted(set(rows_honor) | set(want))
            if k not in rows_honor or k not in want or not close(rows_honor[k], want[k])
        ]
        missing = sorted(expected - {k[2] for k in want})
        c.check(
            rows_honor and not bad and not missing,
            f"OpenCost {name} ({agg} of DCGM_FI_PROF_GR_ENGINE_ACTIVE by container): "
            f"{len(rows_honor)} containers, exactly the {len(expected)} expected, each the figure "
            f"gpu_container_sm_utilization_ratio gives"
            + ("" if not bad else "; differs: " + "; ".join(bad[:6]))
            + (f"; no tessera figure for {missing}" if missing else ""),
        )
    # Without honor_labels the series' pod labels are renamed, so OpenCost's grouping sees only
    # the exporter's own pod: why OpenCost (and dcgm-exporter's docs) need honor_labels: true.
    q = fill(oc["usage_avg"], window=w, cluster=cluster, filter="")
    plain_rows = {pod_of(m) for m, _ in prom.query(q.replace('{container!=""}', f'{{container!="",job="{plain}"}}'))}
    c.check(
        plain_rows == {exporter},
        f"[{plain}] without honor_labels OpenCost's usage query groups everything under the "
        f"exporter's own pod {exporter} (got {sorted(plain_rows)})",
    )

    # GPUInfo: which device each container holds; every row must be a real holding.
    q = fill(oc["gpu_info"], window=w, cluster=cluster, filter="")
    info = prom.query(q.replace('{container!=""', f'{{job="{honor}",container!=""'))
    real = {(u, mig_ids.get(mi, (u, ""))[1]) + p for (u, mi), ps in holders.items() for p in ps}
    bogus = [
        (m.get("UUID"),) + pod_of(m)
        for m, _ in info
        if not any(r[0] == m.get("UUID") and r[2:] == pod_of(m) for r in real)
    ]
    c.check(
        info and not bogus,
        f"OpenCost gpu_info (DCGM_FI_DEV_DEC_UTIL by container, UUID, device, modelName): "
        f"{len(info)} rows, each a container on the GPU it holds" + (f"; not holders: {bogus}" if bogus else ""),
    )

    # Its expected rows: the containers holding a whole GPU alone; DEC_UTIL has no per-pod
    # figure, so a shared GPU's is all remainder and MIG instances have none.
    want_info = set(oc["gpu_info_pods"])
    got_info = {pod_of(m)[2]: (m, v) for m, v in info}
    dec = {m["uuid"]: v * 100.0 for m, v in tessera("gpu_decoder_utilization_ratio")}
    wrong_info = [
        f"{p}: {v} vs {dec.get(m.get('UUID'))}"
        for p, (m, v) in got_info.items()
        if not close(v, dec.get(m.get("UUID"), float("nan")))
    ]
    c.check(
        set(got_info) == want_info and not wrong_info,
        f"OpenCost gpu_info: exactly the {len(want_info)} containers holding a whole GPU alone, each "
        f"at its GPU's decoder utilization" + (f"; got {sorted(got_info)}" if set(got_info) != want_info else "")
        + (f"; wrong: {wrong_info}" if wrong_info else ""),
    )

    # OpenCost's memory-used ratio per container (avg and max forms): FB_FREE pairs with FB_USED
    # per series, so every container holding memory reads its device's occupancy, MIG included.
    occupancy = {}  # (UUID, GPU_I_ID) -> OpenCost's formula on tessera's own device families
    for m, v in prom.query(
        f'avg_over_time(gpu_memory_used_bytes{{job="{honor}"}}[{w}]) / '
        f'(avg_over_time(gpu_memory_total_bytes{{job="{honor}"}}[{w}]) - '
        f'avg_over_time(gpu_memory_reserved_bytes{{job="{honor}"}}[{w}]))'
    ):
        occupancy[(m["uuid"], "")] = v
    for m, v in prom.query(
        f'avg_over_time(gpu_mig_instance_memory_used_bytes{{job="{honor}"}}[{w}]) / '
        f'avg_over_time(gpu_mig_instance_memory_total_bytes{{job="{honor}"}}[{w}])'
    ):
        occupancy[(m["uuid"], m["gpu_instance_id"])] = v
    holding = {
        (uuid, mig_ids.get(mi, (uuid, ""))[1]) + pod_of(m)
        for m, v in tessera("gpu_container_memory_used_bytes")
        if v > 0
        for uuid, mi in [(m["uuid"], m.get("mig_uuid", ""))]
    }
    for name in ("memory_used_ratio_avg", "memory_used_ratio_max"):
        q = fill(oc[name], window=w, cluster=cluster, filter="")
        q = q.replace('{container!=""', f'{{job="{honor}",container!=""')
        got = {device_key(m) + pod_of(m): v for m, v in prom.query(q)}
        bad = []
        for k in sorted(holding):
            truth = occupancy.get(k[:2])
            v = got.get(k)
            if v is None or truth is None or abs(v - truth) > 0.01 * truth:
                bad.append(f"{k[4]} on {k[0][:12]}… GI {k[1] or '-'}: {v} vs {truth}")
        mig_rows = sum(1 for k in holding if k[1])
        c.check(
            holding and not bad,
            f"OpenCost {name} (FB_USED / (FB_USED + FB_FREE) by container): each of the "
            f"{len(holding)} containers holding memory ({mig_rows} on MIG instances) within 1 % of "
            f"its device's occupancy" + (f"; wrong: {bad[:5]}" if bad else ""),
        )

    # Device-level queries group by device only and average, assuming dcgm-exporter's copies.
    compat = {}  # field -> [(labels, value)] from the honor job at the instant
    for f in DEVICE_FAMILY:
        compat[f] = prom.query(f'{f}{{job="{honor}"}}')
    dev_q = fill(oc["device_usage_avg"], window=w, cluster=cluster, filter="")
    dev_q = dev_q.replace("DCGM_FI_PROF_GR_ENGINE_ACTIVE{", f'DCGM_FI_PROF_GR_ENGINE_ACTIVE{{job="{honor}"')
    dev_rows = {(m.get("UUID", ""), m.get("GPU_I_ID", "")): v for m, v in prom.query(dev_q)}
    sum_q = (
        f'sum by (UUID, GPU_I_ID) (avg_over_time(DCGM_FI_PROF_GR_ENGINE_ACTIVE{{job="{honor}"}}[{w}]))'
    )
    dev_sum = {(m.get("UUID", ""), m.get("GPU_I_ID", "")): v for m, v in prom.query(sum_q)}
    n_series = {}
    for m, _ in compat["DCGM_FI_PROF_GR_ENGINE_ACTIVE"]:
        n_series[device_key(m)] = n_series.get(device_key(m), 0) + 1
    single = [k for k, n in n_series.items() if n == 1]
    bad_single = [k for k in single if not close(dev_rows.get(k, -1), dev_sum.get(k, -2))]
    c.check(
        single and not bad_single,
        f"OpenCost device_usage_avg on the {len(single)} devices with one series: the device's value",
    )
    split = sorted(k for k, n in n_series.items() if n > 1)
    for k in split:
        c.note(
            f"OpenCost device_usage_avg on split device {k[0][:12]}… GI {k[1] or '-'}: "
            f"avg of {n_series[k]} series = {dev_rows.get(k, 0):.4g}, the device's value "
            f"(sum by UUID, GPU_I_ID) = {dev_sum.get(k, 0):.4g}"
        )

    # --- no copies: a tenant on a shared device gets its own figure, never the device's -------
    sharing = {}
    for f, rows in compat.items():
        for m, _ in rows:
            sharing[device_key(m)] = m.get("sharing_mode", "")
    shared = {k for k, mode in sharing.items() if mode.split("+")[-1] not in EXCLUSIVE}
    for f in additive:
        rows = compat.get(f, [])
        tenants = [(m, v) for m, v in rows if device_key(m) in shared and pod_of(m)[2]]
        if f in PAIRED:
            continue
        if f in TENANT_FAMILY:
            fam, factor, where = TENANT_FAMILY[f]
            figs = tenant_figures(fam, factor, where)
            wrong = [
                f"{pod_of(m)} {v} vs {figs.get(device_key(m) + pod_of(m))}"
                for m, v in tenants
                if not close(v, figs.get(device_key(m) + pod_of(m), float("nan")))
            ]
            c.check(
                not wrong,
                f"no copies: {f} on shared devices: {len(tenants)} tenant series, each the tenant's "
                f"own {fam}" + (f"; wrong: {wrong[:4]}" if wrong else ""),
            )
        else:
            c.check(
                not tenants,
                f"no copies: {f} has no per-tenant figure, so no tenant series on shared devices"
                + (f"; found {[pod_of(m) for m, _ in tenants][:4]}" if tenants else ""),
            )
    # The copy dcgm-exporter makes (#582): every tenant handed the device's value.
    device_value = {}  # (field, (UUID, GPU_I_ID)) -> tessera's own device figure, DCGM unit
    for f, fams in DEVICE_FAMILY.items():
        for fam, mig in ((fams[0], False), (fams[1], True)):
            if fam is None or fam[0] == "derived":
                continue
            for m, v in tessera(fam[0]):
                key = (m["uuid"], m.get("gpu_instance_id", "")) if mig else (m["uuid"], "")
                device_value[(f, key)] = v * fam[1]
    # Free memory: total - used - reserved, per GPU and per MIG instance (no reserve there).
    for suffix, mig in (("gpu_memory_%s_bytes", False), ("gpu_mig_instance_memory_%s_bytes", True)):
        parts = {}
        for part in ("total", "used", "reserved"):
            for m, v in tessera(suffix % part):
                key = (m["uuid"], m.get("gpu_instance_id", "")) if mig else (m["uuid"], "")
                parts.setdefault(key, {})[part] = v
        for key, p in parts.items():
            if "total" in p and "used" in p:
                free = max(p["total"] - p["used"] - p.get("reserved", 0.0), 0.0) / MIB
                device_value[("DCGM_FI_DEV_FB_FREE", key)] = free
    copied = []
    for f in TENANT_FAMILY:
        by_dev = {}
        for m, v in compat.get(f, []):
            if device_key(m) in shared:
                by_dev.setdefault(device_key(m), []).append((m, v))
        for k, rows in by_dev.items():
            total = device_value.get((f, k), sum(v for _, v in rows))
            # One active tenant may own all of it; two tenants both holding the total is a copy.
            full = [m for m, v in rows if pod_of(m)[2] and v > 0 and close(v, total)]
            if len(full) >= 2:
                copied.append((f, k[0][:12], k[1], [pod_of(m)[2] for m in full]))
    c.check(
        shared and not copied,
        f"no container on the {len(shared)} shared devices is handed the device's value"
        + (f"; copied: {copied}" if copied else ""),
    )

    # --- the sum by GPU is the device total, for every additive field -------------------------
    for f in additive:
        if f not in DEVICE_FAMILY:
            c.fail(f"sum by GPU: additive field {f} has no entry in DEVICE_FAMILY (check_consumers.py)")
            continue
        rows = compat.get(f, [])
        sums = {}
        for m, v in rows:
            sums[device_key(m)] = sums.get(device_key(m), 0.0) + v
        fam_whole, fam_mig = DEVICE_FAMILY[f]
        bad, compared = [], 0
        mig_uuids = {k[0] for k in sums if k[1]}
        for k, s in sums.items():
            fam = fam_mig if k[1] else fam_whole
            if fam is None:
                continue
            if not k[1] and k[0] in mig_uuids:
                # A MIG GPU's row outside its instances: a part of the sum by UUID below.
                continue
            want = device_value.get((f, k))
            compared += 1
            if want is None or not close(s, want):
                bad.append(f"{k[0][:12]}… GI {k[1] or '-'}: {s} vs {fam[0]} {want}")
        if f in PARTS_OF_THE_GPU:
            # Issue 46: FB_FREE's instances alone missed 10.5-11.2 GB on each demo MIG GPU.
            for uuid in sorted(mig_uuids):
                s = sum(v for (u, _), v in sums.items() if u == uuid)
                want = device_value.get((f, (uuid, "")))
                compared += 1
                if want is None or not close(s, want):
                    bad.append(f"{uuid[:12]}… sum by UUID (MIG GPU): {s} vs {fam_whole[0]} {want}")
        # Where tessera has no family of its own, one series per device, the remainder alone.
        lone = [k for k, s in sums.items() if (fam_mig if k[1] else fam_whole) is None]
        bad_lone = [
            k
            for k in lone
            if f not in TENANT_FAMILY and k in shared and any(device_key(m) == k and pod_of(m)[2] for m, _ in rows)
        ]
        ok = rows and not bad and not bad_lone
        by = "UUID, and UUID+GPU_I_ID on MIG" + (", and UUID alone on MIG" if f in PARTS_OF_THE_GPU else "")
        c.check(
            ok if rows else False,
            f"sum by ({by}) of {f} = the device total on {compared} devices"
            + (f" ({len(lone)} more with no tessera family: one remainder series each)" if lone else "")
            + ("" if rows else "; NO SERIES")
            + (f"; differs: {bad[:4]}" if bad else "")
            + (f"; tenant series without a figure on {bad_lone}" if bad_lone else ""),
        )

    # --- an autoscaler's per-pod query -------------------------------------------------------
    auto = spec["autoscaler"]
    tenants = sorted(
        {(m["namespace"], m["pod"]) for m, _ in compat["DCGM_FI_PROF_GR_ENGINE_ACTIVE"] if m.get("pod")}
    )
    bad_h, bad_p, leak = [], [], []
    for ns, pod in tenants:
        want = sum(
            v for m, v in compat["DCGM_FI_PROF_GR_ENGINE_ACTIVE"] if m.get("pod") == pod and m.get("namespace") == ns
        )
        qh = fill(auto["with_honor_labels"], pod=pod, namespace=ns).replace("{", f'{{job="{honor}",', 1)
        got_h = prom.query(qh)
        if not got_h or not close(sum(v for _, v in got_h), want):
            bad_h.append((ns, pod))
        qp = fill(auto["without_honor_labels"], pod=pod, namespace=ns).replace("{", f'{{job="{plain}",', 1)
        got_p = prom.query(f"avg_over_time(({qp})[{w}:1s])")
        want_p = prom.query(f"avg_over_time(({qh})[{w}:1s])")
        if not got_p or not close(sum(v for _, v in got_p), sum(v for _, v in want_p), rel=0.05):
            bad_p.append((ns, pod, [v for _, v in got_p], [v for _, v in want_p]))
        # Without honor_labels `pod` is the exporter's: the same query by `pod` finds nothing.
        if prom.query(fill(auto["with_honor_labels"], pod=pod, namespace=ns).replace("{", f'{{job="{plain}",', 1)):
            leak.append((ns, pod))
    c.check(
        tenants and not bad_h,
        f"[{honor}] autoscaler query by pod/namespace answers each of {len(tenants)} tenant pods "
        f"with its figure" + (f"; wrong: {bad_h[:4]}" if bad_h else ""),
    )
    c.check(
        tenants and not bad_p,
        f"[{plain}] the same query by exported_pod/exported_namespace answers each tenant pod "
        f"(averaged over {w}, within 5 %: the two jobs scrape at different instants)"
        + (f"; wrong: {bad_p[:3]}" if bad_p else ""),
    )
    c.check(
        not leak,
        f"[{plain}] by pod/namespace (no exported_ prefix) it finds none of them: those labels are the "
        f"exporter's own" + (f"; found {leak[:4]}" if leak else ""),
    )
    # honor_labels: true must not hand the remainder (empty pod labels) to the exporter's pod.
    own = prom.query(
        f'count({{__name__=~"DCGM_FI_.*",job="{honor}",namespace="{exp_ns}",pod="{exp_pod}"}})'
    )
    c.check(
        not own,
        f"[{honor}] no DCGM series carries the exporter's own pod: a remainder's empty pod labels stay "
        f"empty under honor_labels" + (f" (found {own[0][1]:.0f})" if own else ""),
    )

    print(f"check_consumers: {c.passed} passed, {c.failed} failed")
    return 0 if c.failed == 0 else 1


if __name__ == "__main__":
    sys.exit(main())

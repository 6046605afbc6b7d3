#!/usr/bin/env python3
"""Alerts from a real Prometheus through a real Alertmanager to a webhook receiver.

    test_alertmanager.py --root .

Prometheus (Debian's `prometheus`) evaluates alerts/*.yaml (every `for:` set to 0s by
tests/prometheus/rules_for_test.py, expressions unchanged) against a synthetic exposition
served here, plus a scrape target that is down; it sends to Alertmanager (Debian's
`prometheus-alertmanager`) running deploy/alertmanager/alertmanager.yml with only the
receivers' URLs (pointed at the webhook receiver in this script) and the grouping timers
(1s) changed. The exposition stages one situation per GPU:

  gpu-a/0  idle allocation in ml-research        -> team-ml-research, labels intact
  gpu-a/1  critical XID 79, XID 94, idle alloc   -> pager; XID warning and idle inhibited
  gpu-a/2  NVML lost, MIG slices unpartitioned   -> pager; MIG info inhibited
  gpu-a/3  idle allocation in team-b             -> gpu-tenants
  gpu-a/4  MIG slices unpartitioned (healthy)    -> gpu-reports (the control for gpu-a/2)
  gpu-b    exporter down; an idle allocation     -> gpu-platform; idle inhibited (the allocation
           served once Alertmanager holds the exporter-down alert, the order `for:` gives deployed)

Checks which receiver got which alert (namespace, pod, container, severity and
runbook_url intact), that notifications are grouped per GPU, and that the inhibited
alerts reached no receiver while Alertmanager lists them as suppressed, inhibited by the
expected alert. Everything listens on 127.0.0.1; every process is stopped on exit.
Prints "ok ..."/"FAIL ..." and "test_alertmanager: N passed, M failed".
"""
import argparse
import http.server
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request

import yaml

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "prometheus"))
from checker import Checker  # noqa: E402

URL_BASE = "http://alert-webhook.monitoring.svc:8080"


def gpu(node, index, sharing="exclusive"):
    return f'node="{node}",gpu="{index}",uuid="GPU-{node}-{index}",sharing_mode="{sharing}"'


# Idle seconds grow a second a second: the idle alerts read their rate.
STARTED = time.monotonic()


def allocation(node, index, ns, pod):
    ctr = f'namespace="{ns}",pod="{pod}",container="main"'
    g = gpu(node, index)
    idle = time.monotonic() - STARTED
    return [
        f'gpu_container_allocation{{{g},mig_uuid="",{ctr},workload_kind="Job",workload="{pod}",'
        f'resource="nvidia.com/gpu",device_id="GPU-{node}-{index}"}} 1',
        f'gpu_container_idle_seconds_total{{{g},mig_uuid="",{ctr}}} {idle:.3f}',
        f'gpu_container_memory_used_bytes{{{g},mig_uuid="",{ctr}}} 0',
    ]


def exposition(gpu_b_allocated=True):
    lines = []
    for node, n in (("gpu-a", 5), ("gpu-b", 1)):
        for i in range(n):
            up = 0 if (node, i) == ("gpu-a", 2) else 1
            lines.append(f"gpu_up{{{gpu(node, i)}}} {up}")
    lines += allocation("gpu-a", 0, "ml-research", "trainer-0")
    lines += allocation("gpu-a", 1, "ml-research", "eval-2")
    lines += allocation("gpu-a", 3, "team-b", "notebook-1")
    if gpu_b_allocated:
        lines += allocation("gpu-b", 0, "team-b", "batch-7")
    lines.append(f'gpu_xid_errors_total{{{gpu("gpu-a", 1)},xid="79"}} 1')
    lines.append(f'gpu_xid_errors_total{{{gpu("gpu-a", 1)},xid="94"}} 2')
    for i in (2, 4):
        g = gpu("gpu-a", i, "mig")
        lines += [f"gpu_mig_slices{{{g}}} 7", f"gpu_mig_slices_used{{{g}}} 3"]
    return ("\n".join(lines) + "\n").encode()


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def serve(handler_cls):
    srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler_cls)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    return srv


def http_json(url, timeout=3):
    with urllib.request.urlopen(url, timeout=timeout) as r:
        return json.load(r)


def wait_ready(url, proc, seconds):
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            return False
        try:
            urllib.request.urlopen(url, timeout=2).read()
            return True
        except OSError:
            time.sleep(0.25)
    return False


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--root", required=True)
    ap.add_argument("--wait", type=float, default=90, help="seconds to wait for the notifications")
    a = ap.parse_args()
    c = Checker()
    tmp = tempfile.mkdtemp(prefix="tessera-am-test.")
    procs = []
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(130))
    try:
        run(a, c, tmp, procs)
    finally:
        for p in procs:
            p.terminate()
        for p in procs:
            try:
                p.wait(timeout=10)
            except subprocess.TimeoutExpired:
                p.kill()
        shutil.rmtree(tmp, ignore_errors=True)
    print(f"test_alertmanager: {c.passed} passed, {c.failed} failed")
    return 1 if c.failed else 0


def run(a, c, tmp, procs):
    shipped = os.path.join(a.root, "deploy/alertmanager/alertmanager.yml")
    chk = subprocess.run(["amtool", "check-config", shipped], capture_output=True, text=True, timeout=30)
    c.check(chk.returncode == 0, "amtool check-config deploy/alertmanager/alertmanager.yml")

    # The exporter-down inhibition names the waste and overload alerts by name: it must cover
    # every alert of those groups, and name no alert that does not exist.
    with open(shipped, encoding="utf-8") as f:
        inhibit = yaml.safe_load(f)["inhibit_rules"]
    with open(os.path.join(a.root, "alerts/tessera-alerts.yaml"), encoding="utf-8") as f:
        groups = yaml.safe_load(f)["groups"]
    names = {r["alert"] for g in groups for r in g["rules"] if "alert" in r}
    data_alerts = {r["alert"] for g in groups if g["name"] in ("tessera.waste", "tessera.waste.layout", "tessera.overload")
                   for r in g["rules"] if "alert" in r}
    for rule in inhibit:
        for m in rule["source_matchers"] + rule["target_matchers"]:
            label, op, value = re.match(r'(\w+)\s*(=~|!~|!=|=)\s*"(.*)"$', m).groups()
            if label != "alertname":
                continue
            pattern = re.compile(f"^(?:{value})$")
            matched = {n for n in names if pattern.match(n)}
            # Each alternative must name (or, as a pattern, match) an alert that exists.
            dangling = [alt for alt in value.split("|") if not any(re.match(f"^(?:{alt})$", n) for n in names)]
            c.check(matched and not dangling, f"inhibition matcher {m[:60]}... names existing alerts "
                    f"({len(matched)})" + (f", not {dangling}" if dangling else ""))
            if m in rule["target_matchers"]:
                missing = sorted(data_alerts - matched)
                c.check(not missing, f"exporter-down inhibition covers every waste/overload alert"
                        + (f" (missing {missing})" if missing else f" ({len(data_alerts)})"))

    # Deployed, TesseraExporterDown (for: 5m) is active long before an idle alert (for: 1h) of
    # the same node; with every for: at 0s, gpu-b's idle allocation could reach Alertmanager
    # first and be sent before its inhibitor existed (seen once in CI). So gpu-b's allocation
    # is served only once Alertmanager holds TesseraExporterDown, as it would in a cluster.
    exporter_down = threading.Event()

    class Exposition(http.server.BaseHTTPRequestHandler):
        def do_GET(self):
            body = exposition(gpu_b_allocated=exporter_down.is_set())
            self.send_response(200)
            self.send_header("Content-Type", "text/plain; version=0.0.4")
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *_):
            pass

    received = []  # (receiver path, payload)
    lock = threading.Lock()

    class Webhook(http.server.BaseHTTPRequestHandler):
        def do_POST(self):
            data = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))))
            with lock:
                received.append((self.path.strip("/"), data))
            self.send_response(200)
            self.end_headers()

        def log_message(self, *_):
            pass

    expo, hook = serve(Exposition), serve(Webhook)
    dead = free_port()  # nothing listens there: the down exporter of node gpu-b

    # The shipped config, with local receivers and 1s grouping timers: routes and inhibitions as shipped.
    with open(shipped, encoding="utf-8") as f:
        text = f.read()
    conf = yaml.safe_load(text.replace(URL_BASE, f"http://127.0.0.1:{hook.server_port}"))

    def fast(route):
        # Only timers the config sets; routes without them inherit the root's.
        for timer in ("group_wait", "group_interval"):
            if timer in route:
                route[timer] = "1s"
        for r in route.get("routes", []):
            fast(r)

    fast(conf["route"])
    am_conf = os.path.join(tmp, "alertmanager.yml")
    with open(am_conf, "w", encoding="utf-8") as f:
        yaml.safe_dump(conf, f)
    am_port, prom_port = free_port(), free_port()
    am_log = open(os.path.join(tmp, "alertmanager.log"), "w")
    am = subprocess.Popen(
        ["prometheus-alertmanager", f"--config.file={am_conf}", f"--storage.path={tmp}/am",
         f"--web.listen-address=127.0.0.1:{am_port}", "--cluster.listen-address=", "--log.level=warn"],
        stdout=am_log, stderr=subprocess.STDOUT)
    procs.append(am)
    ok = wait_ready(f"http://127.0.0.1:{am_port}/-/ready", am, 30)
    c.check(ok, f"Alertmanager ready on 127.0.0.1:{am_port}")
    if not ok:
        print(open(am_log.name).read()[-2000:])
        return

    def watch_exporter_down():
        while not exporter_down.is_set():
            try:
                alerts = http_json(f"http://127.0.0.1:{am_port}/api/v2/alerts")
                if any(al["labels"].get("alertname") == "TesseraExporterDown" for al in alerts):
                    exporter_down.set()
            except (OSError, ValueError):
                pass
            time.sleep(0.25)

    threading.Thread(target=watch_exporter_down, daemon=True).start()

    rules_dir = os.path.join(tmp, "rules")
    rule_files = [os.path.join(a.root, "alerts", n) for n in ("tessera-recording.yaml", "tessera-alerts.yaml")]
    subprocess.run([sys.executable, os.path.join(a.root, "tests/prometheus/rules_for_test.py"), rules_dir,
                    *rule_files], check=True, timeout=30)
    prom_conf = {
        "global": {"scrape_interval": "1s", "scrape_timeout": "1s", "evaluation_interval": "1s"},
        "alerting": {"alertmanagers": [{"static_configs": [{"targets": [f"127.0.0.1:{am_port}"]}]}]},
        "rule_files": [f"{rules_dir}/*.yaml"],
        "scrape_configs": [{
            "job_name": "tessera",
            "honor_labels": True,
            "static_configs": [
                {"targets": [f"127.0.0.1:{expo.server_port}"], "labels": {"node": "gpu-a"}},
                {"targets": [f"127.0.0.1:{dead}"], "labels": {"node": "gpu-b"}},
            ],
        }],
    }
    with open(os.path.join(tmp, "prometheus.yml"), "w", encoding="utf-8") as f:
        yaml.safe_dump(prom_conf, f)
    prom_log = open(os.path.join(tmp, "prometheus.log"), "w")
    prom = subprocess.Popen(
        ["prometheus", f"--config.file={tmp}/prometheus.yml", f"--storage.tsdb.path={tmp}/data",
         f"--web.listen-address=127.0.0.1:{prom_port}", "--log.level=warn"],
        stdout=prom_log, stderr=subprocess.STDOUT)
    procs.append(prom)
    ok = wait_ready(f"http://127.0.0.1:{prom_port}/-/ready", prom, 30)
    c.check(ok, f"Prometheus ready on 127.0.0.1:{prom_port}, sending to Alertmanager")
    if not ok:
        print(open(prom_log.name).read()[-2000:])
        return

    # (alertname, node, gpu) -> receiver it must reach
    expected = {
        ("TesseraGPUAllocatedIdle", "gpu-a", "0"): "team-ml-research",
        ("TesseraGPUXidCritical", "gpu-a", "1"): "gpu-platform-pager",
        ("TesseraGPULost", "gpu-a", "2"): "gpu-platform-pager",
        ("TesseraGPUAllocatedIdle", "gpu-a", "3"): "gpu-tenants",
        ("TesseraMIGSlicesUnpartitioned", "gpu-a", "4"): "gpu-reports",
        ("TesseraExporterDown", "gpu-b", None): "gpu-platform",
    }
    # (alertname, node, gpu) -> the alert that must inhibit it
    inhibited = {
        ("TesseraGPUXidWarning", "gpu-a", "1"): "TesseraGPUXidCritical",
        ("TesseraGPUAllocatedIdle", "gpu-a", "1"): "TesseraGPUXidCritical",
        ("TesseraMIGSlicesUnpartitioned", "gpu-a", "2"): "TesseraGPULost",
        ("TesseraGPUAllocatedIdle", "gpu-b", "0"): "TesseraExporterDown",
    }

    def key(alert):
        lab = alert["labels"]
        return (lab.get("alertname"), lab.get("node"), lab.get("gpu"))

    def delivered():
        with lock:
            return {(key(al), recv): (al, payload) for recv, payload in received for al in payload["alerts"]}

    start = time.monotonic()
    deadline = start + a.wait
    while time.monotonic() < deadline:
        got = set(delivered())
        if all((k, r) in got for k, r in expected.items()):
            break
        time.sleep(0.5)
    c.note(f"expected notifications after {time.monotonic() - start:.1f}s: "
           f"{sum((k, r) in got for k, r in expected.items())} of {len(expected)}")

    # Settled, on conditions rather than a few seconds (which a busy machine can stretch):
    # Alertmanager holds every alert that must be inhibited, suppressed, and the webhook has
    # received every notification Alertmanager sent. An inhibited alert that slipped through
    # went out before it was suppressed, so it is in what the webhook holds by then.
    def sent():
        text = urllib.request.urlopen(f"http://127.0.0.1:{am_port}/metrics", timeout=3).read().decode()
        return sum(float(line.split()[-1]) for line in text.splitlines()
                   if line.startswith('alertmanager_notifications_total{integration="webhook"'))

    def settled():
        try:
            state = {key(al): al["status"]["state"] for al in http_json(f"http://127.0.0.1:{am_port}/api/v2/alerts")}
            n = sent()
        except (OSError, ValueError, KeyError):
            return False
        with lock:
            arrived = len(received)
        return all(state.get(k) == "suppressed" for k in inhibited) and arrived == n

    while time.monotonic() < deadline and not settled():
        time.sleep(0.25)
    c.note(f"settled after {time.monotonic() - start:.1f}s: inhibited alerts suppressed, "
           f"{len(received)} notifications sent and received")
    got = delivered()
    for k, recv in expected.items():
        hit = got.get((k, recv))
        elsewhere = sorted({r for (kk, r) in got if kk == k and r != recv})
        c.check(hit is not None and not elsewhere,
                f"{k[0]} {k[1]}/{k[2]} reached {recv}" + (f" (also {elsewhere})" if elsewhere else ""))
        if hit is None:
            continue
        alert, payload = hit
        lab, ann = alert["labels"], alert["annotations"]
        intact = lab.get("severity") and ann.get("runbook_url", "").startswith("https://") and ann.get("summary")
        if k[0] == "TesseraGPUAllocatedIdle":
            intact = intact and lab.get("namespace") and lab.get("pod") and lab.get("container") == "main"
        c.check(bool(intact), f"{k[0]} {k[1]}/{k[2]}: severity, runbook_url, summary"
                + (", namespace/pod/container" if k[0] == "TesseraGPUAllocatedIdle" else "") + " intact"
                + f" ({lab.get('namespace', '-')}/{lab.get('pod', '-')}, {ann.get('runbook_url', 'no runbook')[-40:]})")
        if k[1] == "gpu-a" and recv == "gpu-platform-pager":
            c.check(payload["groupLabels"].get("node") == k[1] and payload["groupLabels"].get("gpu") == k[2]
                    and all(key(x)[1:] == k[1:] for x in payload["alerts"]),
                    f"{k[0]}: notified in a group of its own GPU ({payload['groupLabels']})")

    try:
        am_alerts = http_json(f"http://127.0.0.1:{am_port}/api/v2/alerts")
    except OSError as e:
        c.fail(f"Alertmanager API: {e}")
        return
    by_key = {key(al): al for al in am_alerts}
    fp_name = {al["fingerprint"]: al["labels"]["alertname"] for al in am_alerts}
    for k, by in inhibited.items():
        reached = sorted(r for (kk, r) in got if kk == k)
        al = by_key.get(k)
        state = al["status"] if al else None
        inhibitors = {fp_name.get(fp) for fp in (state or {}).get("inhibitedBy", [])}
        c.check(al is not None and state["state"] == "suppressed" and by in inhibitors and not reached,
                f"{k[0]} {k[1]}/{k[2]} fired and was inhibited by {by}, reached no receiver"
                + ("" if al else " (never fired: the staging is wrong)")
                + (f" (state {state['state']}, by {sorted(x for x in inhibitors if x)})" if al else "")
                + (f" (reached {reached})" if reached else ""))


if __name__ == "__main__":
    sys.exit(main())

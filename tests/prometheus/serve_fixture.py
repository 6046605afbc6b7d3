#!/usr/bin/env python3
"""Serve tests/prometheus/fixture-exposition.txt as if it were a running tessera.

Used by scripts/test-prometheus.sh while the exporter's `--demo` mode is not
built (TESSERA_BIN missing). It is `python3 -m http.server` plus three things a
static file cannot do, so that rate()/increase() based rules see real data:

* the response carries the exporter's OpenMetrics Content-Type, so Prometheus
  parses it with the same parser as the real exporter;
* counters move: `gpu_container_idle_seconds_total` grows by one per second for
  every container whose `gpu_container_sm_utilization_ratio` (same labels) is
  0 in the fixture, and `gpu_energy_joules_total` grows by the GPU's
  `gpu_power_watts`;
* `tessera_last_sample_timestamp_seconds` is the current time.

It also answers /healthz and /readyz like the exporter. Loopback only.

    serve_fixture.py FIXTURE PORT
"""
import http.server
import re
import sys
import time

SAMPLE = re.compile(r'^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{.*\})? (\S+)$')
CONTENT_TYPE = "application/openmetrics-text; version=1.0.0; charset=utf-8"


def load(path):
    with open(path, encoding="utf-8") as f:
        return f.read().splitlines()


def render(lines, started):
    elapsed = time.time() - started
    util, power = {}, {}
    for line in lines:
        m = SAMPLE.match(line)
        if not m:
            continue
        name, labels, value = m.group(1), m.group(2) or "", m.group(3)
        if name == "gpu_container_sm_utilization_ratio":
            util[labels] = float(value)
        elif name == "gpu_power_watts":
            power[labels] = float(value)
    out = []
    for line in lines:
        m = SAMPLE.match(line)
        if m:
            name, labels, value = m.group(1), m.group(2) or "", m.group(3)
            if name == "tessera_last_sample_timestamp_seconds":
                line = f"{name}{labels} {time.time():.3f}"
            elif name == "gpu_container_idle_seconds_total" and util.get(labels, 1.0) == 0.0:
                line = f"{name}{labels} {float(value) + elapsed:.3f}"
            elif name == "gpu_energy_joules_total" and labels in power:
                line = f"{name}{labels} {float(value) + power[labels] * elapsed:.3f}"
        out.append(line)
    return ("\n".join(out) + "\n").encode()


def main():
    path, port = sys.argv[1], int(sys.argv[2])
    lines = load(path)
    started = time.time()

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self):
            if self.path.split("?")[0] == "/metrics":
                body, ctype = render(lines, started), CONTENT_TYPE
            elif self.path in ("/healthz", "/readyz"):
                body, ctype = b"ok\n", "text/plain"
            else:
                self.send_error(404)
                return
            self.send_response(200)
            self.send_header("Content-Type", ctype)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args):
            pass

    http.server.ThreadingHTTPServer(("127.0.0.1", port), Handler).serve_forever()


if __name__ == "__main__":
    main()

"""A stand-in for tessera in driver.py's dry run: serves /metrics (a busy ratio, bounds and
an SM share for every pid that connected... here, every pid under /tmp/corpus-run/ready) and
/debug/attribution, so the driver's reads and analyze.py can be checked without a GPU."""
import argparse
import glob
import json
import random
from http.server import BaseHTTPRequestHandler, HTTPServer


class H(BaseHTTPRequestHandler):
    def log_message(self, *a):
        pass

    def do_GET(self):
        pids = []
        for f in glob.glob("/tmp/corpus-run*/ready/*"):
            try:
                pids.append(json.load(open(f))["pid"])
            except (OSError, ValueError):
                pass
        if self.path.startswith("/metrics"):
            lines = []
            for p in pids:
                v = random.uniform(0, 0.4)
                lines.append(f'gpu_process_busy_ratio{{gpu="0",pid="{p}"}} {v}')
                lines.append(f'gpu_process_busy_ratio_lower{{gpu="0",pid="{p}"}} {v * 0.8}')
                lines.append(f'gpu_process_busy_ratio_upper{{gpu="0",pid="{p}"}} {v * 1.3}')
            body = "\n".join(lines) + "\n"
        else:
            body = json.dumps({"gpus": [{"index": 0, "compute": {"method": random.choice(["probe", "disputed"]),
                                                                 "candidates": pids, "quiet": [], "disputed": []}}]})
        self.send_response(200)
        self.end_headers()
        self.wfile.write(body.encode())


p = argparse.ArgumentParser()
p.add_argument("--web.listen-address", dest="addr", default="127.0.0.1:9950")
a, _ = p.parse_known_args()
host, port = a.addr.rsplit(":", 1)
HTTPServer((host, int(port)), H).serve_forever()

#!/usr/bin/env python3
"""An Alertmanager stand-in for vmalert in scripts/fleet.sh: answers 200 to everything and
keeps nothing (the fleet measures rule evaluation, not notification).

    sink.py PORT
"""
import sys
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


class Sink(BaseHTTPRequestHandler):
    def _ok(self):
        length = int(self.headers.get("Content-Length") or 0)
        if length:
            self.rfile.read(length)
        self.send_response(200)
        self.send_header("Content-Length", "0")
        self.end_headers()

    do_GET = do_POST = _ok

    def log_message(self, *_):
        pass


ThreadingHTTPServer(("127.0.0.1", int(sys.argv[1])), Sink).serve_forever()

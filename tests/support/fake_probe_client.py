#!/usr/bin/env python3
"""A stand-in for the CUDA probe (crates/probe) in end-to-end tests.

It connects to tessera's probe socket, retrying until tessera listens, and every 0.2 s sends
what the probe would for a process whose kernels cover COVERED of every millisecond: totals
only (wire 1), a per-millisecond timeline (wire 2), or a timeline traced in 20 ms slots
(wire 3). The options add the quirks the tests need. It exits when tessera closes the socket.
"""

import argparse
import socket
import struct
import sys
import time

MAGIC = b"TSP1"
CONTROL_MAGIC = b"TSC1"
# Wire 1 flags: records disabled, and the process alone on its device; a profiler in the
# process holds CUPTI (with DISABLED).
DISABLED, ALONE, PROFILER = 1, 4, 8
# Control flag: the device is shared, so records are wanted.
SHARED = 1
UNTRACED = struct.pack("<HH", 0xFFFF, 0)
IDLE = struct.pack("<HH", 0, 0)
MAX_CELLS = 16384
SLOT_MS = 20
TURN_MS = 10


def options():
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("socket")
    p.add_argument("--wire", type=int, choices=(1, 2, 3), default=2)
    p.add_argument("--covered", type=float, default=0.0,
                   help="share of each millisecond its kernels cover (wire 1: busy s per s)")
    p.add_argument("--solo", type=float,
                   help="share the kernels' solo durations explain (default: --covered)")
    p.add_argument("--every", type=int, default=1,
                   help="wire 3: traces one 20 ms slot in EVERY, nested (8 implies 2)")
    p.add_argument("--turns", type=int, choices=(0, 1),
                   help="kernels only in the even (0) or odd (1) tens of milliseconds")
    p.add_argument("--clock-offset", type=float, default=0.0,
                   help="seconds its clock runs ahead of the wall clock")
    p.add_argument("--silent-after", type=float, default=0.0,
                   help="stays connected but sends nothing after this many seconds (0: never)")
    p.add_argument("--spin", action="store_true",
                   help="spins a core between frames instead of sleeping")
    p.add_argument("--profiler-after", type=float, default=0.0,
                   help="after this many seconds a profiler holds CUPTI: totals frozen, flagged "
                        "PROFILER and DISABLED (0: never)")
    p.add_argument("--profiler-for", type=float, default=0.0,
                   help="the profiler lets CUPTI go after this many seconds; the timeline starts "
                        "over (0: never)")
    p.add_argument("--records-log",
                   help="records off (wire 1, disabled and alone) until a control message says "
                        "the device is shared, then a wire 2 timeline; appends each switch here")
    a = p.parse_args()
    if a.solo is None:
        a.solo = a.covered
    return a


def connect(path):
    while True:
        try:
            s = socket.socket(socket.AF_UNIX)
            s.connect(path)
            return s
        except OSError:
            time.sleep(0.05)


def totals_frame(busy_ns, kernels, flags):
    return MAGIC + struct.pack("<IQQII", 1, busy_ns, kernels, flags, 0)


class Timeline:
    """The milliseconds since `start_ns` on the probe's clock, sent once each."""

    def __init__(self, a, start_ns):
        self.a = a
        self.start_ns = start_ns
        self.start = start_ns // 1_000_000
        self.sent = self.start
        self.full = 2  # the first frame carries the whole timeline
        self.traced_ms = 0
        self.busy = struct.pack("<HH", int(a.covered * 1000), int(a.solo * 1000))

    def cell(self, ms):
        a = self.a
        if a.wire == 3:
            traced = (ms // SLOT_MS) % a.every == 0
            self.traced_ms += traced
            return self.busy if traced else UNTRACED
        if a.turns is not None and (ms // TURN_MS) % 2 != a.turns:
            return IDLE
        return self.busy

    def frame(self, now, kernels):
        a = self.a
        upto = now // 1_000_000
        n = min(upto - self.sent, MAX_CELLS)
        first = upto - n
        body = b"".join(self.cell(ms) for ms in range(first, upto))
        common = (kernels, self.full, 0, now, self.start, first, n, 0)
        if a.wire == 3:
            busy_ns = int(self.traced_ms * a.covered * 1e6)
            head = struct.pack("<4sIQQIIQQQIIQ", MAGIC, 3, busy_ns, *common,
                               self.traced_ms * 1_000_000)
        else:
            duty = 1.0 if a.turns is None else 0.5
            busy_ns = int((now - self.start_ns) * a.covered * duty)
            head = struct.pack("<4sIQQIIQQQII", MAGIC, 2, busy_ns, *common)
        self.sent, self.full = upto, 0
        return head + body, busy_ns


def control_messages(s, pending):
    """Reads what tessera sent without blocking; returns the complete control messages' flags
    and the bytes left over. Exits when tessera closed the socket."""
    try:
        data = s.recv(256, socket.MSG_DONTWAIT)
        if data == b"":
            sys.exit(0)
    except BlockingIOError:
        data = b""
    pending += data
    flags = []
    while len(pending) >= 16:
        magic, version, f, _ = struct.unpack("<4sIII", pending[:16])
        pending = pending[16:]
        if magic == CONTROL_MAGIC and version == 1:
            flags.append(f)
    return flags, pending


def main():
    a = options()
    clock = lambda: time.time_ns() + int(a.clock_offset * 1e9)
    began = time.time()
    start_ns = clock()
    timeline = None if a.records_log else Timeline(a, start_ns)
    s = connect(a.socket)
    kernels, busy_ns, shared, pending = 0, 0, False, b""
    while True:
        if a.silent_after > 0 and time.time() - began > a.silent_after:
            time.sleep(3600)
        since = time.time() - began
        profiled = a.profiler_after > 0 and since > a.profiler_after and (
            a.profiler_for <= 0 or since <= a.profiler_after + a.profiler_for)
        if profiled:
            frame = totals_frame(busy_ns, kernels, DISABLED | PROFILER)
            timeline = Timeline(a, clock())  # a full one again once the profiler is gone
            try:
                s.sendall(frame)
            except OSError:
                sys.exit(0)
            time.sleep(0.2)
            continue
        if a.records_log:
            flags, pending = control_messages(s, pending)
            for f in flags:
                if bool(f & SHARED) != shared:
                    shared = bool(f & SHARED)
                    with open(a.records_log, "a") as log:
                        log.write(("on" if shared else "off") + "\n")
                    timeline = Timeline(a, clock()) if shared else None
        if timeline is None:
            frame = totals_frame(busy_ns, kernels, DISABLED | ALONE)
        else:
            kernels += 10 if a.covered > 0 else 0
            if a.wire == 1:
                busy_ns = int((time.time() - began) * a.covered * 1e9)
                frame = totals_frame(busy_ns, kernels, 0)
            else:
                frame, busy_ns = timeline.frame(clock(), kernels)
        try:
            s.sendall(frame)
        except OSError:
            sys.exit(0)  # tessera stopped
        if a.spin:
            t = time.time()
            while time.time() - t < 0.2:
                pass
        else:
            time.sleep(0.2)


if __name__ == "__main__":
    main()

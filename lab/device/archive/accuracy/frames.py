"""Listens on a probe socket in tessera's place and logs every frame the CUDA probe sends (one
JSON line each): receipt time, the sender's pid, counters, the probe's clock, and the newest
millisecond its timeline covers. For measuring the probe's delivery lag and lumpiness.
Usage: frames.py SOCKET DURATION OUT.jsonl"""
import socket, struct, sys, time, json, os, threading
path, dur, out = sys.argv[1], float(sys.argv[2]), sys.argv[3]
try: os.unlink(path)
except FileNotFoundError: pass
srv = socket.socket(socket.AF_UNIX); srv.bind(path); os.chmod(path, 0o777); srv.listen(64)
srv.settimeout(0.2)
lock, rows, end = threading.Lock(), [], time.time() + dur
def read_exact(c, n):
    b = b""
    while len(b) < n:
        k = c.recv(n - len(b))
        if not k: raise EOFError
        b += k
    return b
def serve(c):
    pid = struct.unpack("3i", c.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, 12))[0]
    c.settimeout(1.0)
    while time.time() < end:
        try:
            h = read_exact(c, 8)
            ver = struct.unpack_from("<I", h, 4)[0]
            h += read_exact(c, {1: 32, 2: 64}.get(ver, 72) - 8)
        except socket.timeout: continue
        except Exception: return
        busy, kernels, flags, dropped = struct.unpack_from("<QQII", h, 8)
        row = {"t": time.time(), "pid": pid, "busy_ns": busy, "kernels": kernels, "flags": flags, "dropped": dropped}
        if ver >= 2:
            now, complete_from, first, count, incomplete = struct.unpack_from("<QQQII", h, 32)
            body = read_exact(c, count * 4)
            newest = None
            for i in range(count - 1, -1, -1):
                if 0 < struct.unpack_from("<H", body, 4 * i)[0] < 0xFFFF: newest = first + i; break
            row.update(now_ns=now, first=first, count=count, incomplete=incomplete, newest_covered=newest)
            if ver >= 3:
                row["traced_ns"] = struct.unpack_from("<Q", h, 64)[0]
                row["untraced_buckets"] = sum(1 for i in range(count) if struct.unpack_from("<H", body, 4 * i)[0] == 0xFFFF)
        with lock: rows.append(row)
while time.time() < end:
    try: c, _ = srv.accept()
    except socket.timeout: continue
    threading.Thread(target=serve, args=(c,), daemon=True).start()
time.sleep(0.5)
with open(out, "w") as f:
    for r in rows: f.write(json.dumps(r) + "\n")

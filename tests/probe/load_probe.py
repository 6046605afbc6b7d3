"""Loads the CUDA probe the way the CUDA driver does (dlopen, then InitializeInjection) in a
process of its own, with the stand-in CUPTI, and waits for its first report on a socket.

    python3 tests/probe/load_probe.py PROBE.so FAKE_CUPTI.so

Prints one line: `loaded: initialize=<rc> frame=<bytes> magic=<magic> version=<v>` and exits
0 when InitializeInjection returned 1 and a frame with the probe's magic arrived within 10 s.
"""
import ctypes
import os
import socket
import struct
import sys
import tempfile


def main() -> int:
    probe, cupti = sys.argv[1], sys.argv[2]
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "probe.sock")
        srv = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        srv.bind(path)
        srv.listen(1)
        srv.settimeout(10)
        os.environ["TESSERA_PROBE_SOCKET"] = path
        os.environ["TESSERA_PROBE_CUPTI"] = cupti
        lib = ctypes.CDLL(os.path.abspath(probe))
        init = lib.InitializeInjection
        init.restype = ctypes.c_int
        rc = init()
        head = b""
        try:
            conn, _ = srv.accept()
            conn.settimeout(10)
            while len(head) < 8:
                chunk = conn.recv(8 - len(head))
                if not chunk:
                    break
                head += chunk
        except OSError as e:
            print(f"no report: {e}")
        magic = head[:4]
        version = struct.unpack("<I", head[4:8])[0] if len(head) == 8 else None
        print(f"loaded: initialize={rc} frame={len(head)} magic={magic!r} version={version}")
        ok = rc == 1 and magic == b"TSP1"
    sys.stdout.flush()
    # Straight out, as a CUDA process that is killed would: the probe's exit path is the
    # host-process tests' business.
    os._exit(0 if ok else 1)


if __name__ == "__main__":
    main()

"""Small probes for scripts/bench-scrape.sh (standard library only).

  probe.py port                      a free loopback TCP port
  probe.py wait URL TIMEOUT_S        wait for /readyz, every collector up, and a series count
                                     unchanged over 3 scrapes 1 s apart; prints the count
  probe.py scrape URL                "bytes series sample_duration_s nvml_duration_s"
  probe.py cpu PID                   "stat_s schedstat_s sampler_s xid_s": CPU time of the process
                                     from /proc/PID/stat (utime+stime, clock ticks), the sum over
                                     its threads' schedstat (ns), and that of the tessera-sampler
                                     and tessera-xid threads
  probe.py threads PID               one line per thread: "name cpu_s"
  probe.py mem PID                   "vmrss_kib vmhwm_kib rssanon_kib rssfile_kib"
"""
import os
import socket
import sys
import time
import urllib.error
import urllib.request


def get(url, timeout=5.0):
    with urllib.request.urlopen(url, timeout=timeout) as r:
        return r.status, r.read()


def series(body):
    return [l for l in body.decode("utf-8", "replace").splitlines() if l and not l.startswith("#")]


def value(lines, prefix):
    for l in lines:
        if l.startswith(prefix):
            try:
                return float(l.rsplit(" ", 1)[1])
            except (IndexError, ValueError):
                return None
    return None


def cmd_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        print(s.getsockname()[1])


def cmd_wait(url, timeout_s):
    base = url.rsplit("/", 1)[0]
    deadline = time.monotonic() + float(timeout_s)
    counts = []
    last = "nothing yet"
    while time.monotonic() < deadline:
        try:
            status, _ = get(base + "/readyz", 2)
            if status == 200:
                _, body = get(url)
                lines = series(body)
                down = [l for l in lines if l.startswith("tessera_collector_success{") and not l.endswith(" 1.0") and not l.endswith(" 1")]
                if down:
                    last = "collectors down: " + "; ".join(down)
                    counts = []
                else:
                    counts.append(len(lines))
                    last = f"{len(lines)} series"
                    if len(counts) >= 3 and len(set(counts[-3:])) == 1:
                        print(counts[-1])
                        return
        except (urllib.error.URLError, OSError) as e:
            last = str(e)
        time.sleep(1)
    sys.exit(f"not ready within {timeout_s} s ({last})")


def cmd_scrape(url):
    _, body = get(url)
    lines = series(body)
    sample = value(lines, "tessera_sample_duration_seconds{")
    nvml = None
    for l in lines:
        if l.startswith("tessera_collector_duration_seconds{") and 'collector="nvml"' in l:
            nvml = float(l.rsplit(" ", 1)[1])
    print(len(body), len(lines), sample if sample is not None else "nan", nvml if nvml is not None else "nan")


def threads(pid):
    out = []
    for tid in os.listdir(f"/proc/{pid}/task"):
        try:
            with open(f"/proc/{pid}/task/{tid}/comm") as f:
                name = f.read().strip()
            with open(f"/proc/{pid}/task/{tid}/schedstat") as f:
                ns = int(f.read().split()[0])
        except (OSError, ValueError, IndexError):
            continue  # the thread exited meanwhile
        out.append((name, ns / 1e9))
    return out


def cmd_cpu(pid):
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    # Fields after "(comm)": state is field 3, so utime (14) and stime (15) are at 11 and 12.
    ticks = int(fields[11]) + int(fields[12])
    t = threads(pid)
    total = sum(s for _, s in t)
    sampler = sum(s for n, s in t if n.startswith("tessera-sampler"))
    xid = sum(s for n, s in t if n.startswith("tessera-xid"))
    print(f"{ticks / os.sysconf('SC_CLK_TCK'):.6f} {total:.6f} {sampler:.6f} {xid:.6f}")


def cmd_threads(pid):
    for name, s in sorted(threads(pid), key=lambda x: -x[1]):
        print(f"{name} {s:.6f}")


def cmd_mem(pid):
    got = {}
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            key, _, rest = line.partition(":")
            if key in ("VmRSS", "VmHWM", "RssAnon", "RssFile"):
                got[key] = int(rest.split()[0])
    print(*(got.get(k, 0) for k in ("VmRSS", "VmHWM", "RssAnon", "RssFile")))


def main(argv):
    cmds = {
        "port": (cmd_port, 0),
        "wait": (cmd_wait, 2),
        "scrape": (cmd_scrape, 1),
        "cpu": (cmd_cpu, 1),
        "threads": (cmd_threads, 1),
        "mem": (cmd_mem, 1),
    }
    if len(argv) < 2 or argv[1] not in cmds or len(argv) - 2 != cmds[argv[1]][1]:
        sys.exit(__doc__)
    fn, _ = cmds[argv[1]]
    fn(*argv[2:])


if __name__ == "__main__":
    main(sys.argv)

"""The containers run's table (driver.py's phases.jsonl and reads.jsonl): per tenant pod, the
labels tessera put on its series, the PIDs inside and outside its namespace, and its per-pod
compute against its kernel-time truth.

    summary.py OUT_DIR            # prints markdown; exit 1 if a check failed

Truth: the matmuls the tenant finished over the reads' window, shifted back by what the figure
lags (tessera's 2 s timeline lag plus half of the 5 s activity window), times one matmul's
kernel time alone (calib.py), over the window's length. A matmul's kernel time scales with the
inverse of the SM clock, and the clock the tenants ran at is not the one calibration ran at:
the truth is a band from that figure to it times calibration clock / serving clock (the median
SM clock over the window, sampled twice a second), as the corpus judges (lab/device/corpus/
analyze.py). tessera's figure: the growth of gpu_container_busy_seconds_total over the window's
samples, and the mean of gpu_container_busy_ratio's reads. Within 10 % of some truth in the band
passes; the error is to the band's nearer edge (0 inside it), and the point error to the
calibrated figure is printed beside it.

    summary.py OUT_DIR RECORDS_DIR    # with the tenants' kernel records (run.sh's rec/)

Under MPS the pair's kernels run at once and each takes longer than it does alone (they share
the SMs), so a matmul's time alone is not the kernel time an MPS client occupies: there the
truth is the client's own CUPTI kernel durations over the same window (its records, over the
part of the window they were on), and the calibrated band is printed as what the same work
would take alone. Time-sliced, a kernel's recorded span also covers the other context's slices
that preempted it, so there the records are printed and the calibrated band judges.
"""
import os
import statistics
import json
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "corpus"))
from replay import load  # noqa: E402

LAG = 2.0 + 2.5
TOLERANCE = 0.10


def at(progress, t):
    """Matmuls done by time t, interpolated in the tenant's progress log."""
    if not progress or t <= progress[0][0]:
        return progress[0][1] if progress else None
    for (t0, n0), (t1, n1) in zip(progress, progress[1:]):
        if t0 <= t <= t1:
            return n0 + (n1 - n0) * (t - t0) / (t1 - t0) if t1 > t0 else n1
    return None


def serving_clock(clocks, t0, t1):
    """The median SM clock (MHz) sampled over [t0, t1], or None."""
    inside = [row[2] for row in clocks if t0 <= row[0] <= t1 and row[2] > 0]
    return statistics.median(inside) if inside else None


CLOCK_MATCH = 0.03


def at_serving_clock(duties, clocks, served):
    """The duty calibration whose median SM clock is nearest `served`, if within CLOCK_MATCH:
    (kernel_ms, its clock)."""
    best = None
    for d in duties or []:
        c = serving_clock(clocks, d["t0"], d["t1"])
        if c and served and (best is None or abs(c - served) < abs(best[1] - served)):
            best = (d["kernel_ms"], c)
    return best if best and abs(best[1] - served) <= CLOCK_MATCH * served else None


def in_run_share(path, t0, t1):
    """The share of [t0, t1] (unix s) the tenant's recorded kernels covered, over the part of it
    its records were on; None without records there."""
    if not os.path.exists(path):
        return None
    ks, stretches, off, _ = load(path)
    lo, hi = t0 * 1e9 - off, t1 * 1e9 - off
    on = sum(max(0, min(e, hi) - max(s, lo)) for s, e in stretches)
    busy = sum(max(0, min(e, hi) - max(s, lo)) for s, e, _, _ in ks)
    return busy / on if on > 0.5 * (hi - lo) else None


def band_error(fig, lo, hi):
    """The figure's relative error to the nearer edge of [lo, hi]: 0 inside it."""
    if fig < lo:
        return (fig - lo) / lo
    if fig > hi:
        return (fig - hi) / hi
    return 0.0


def main():
    out = sys.argv[1]
    records = sys.argv[2] if len(sys.argv) > 2 else None
    phases = [json.loads(l) for l in open(f"{out}/phases.jsonl") if l.strip()]
    reads = [json.loads(l) for l in open(f"{out}/reads.jsonl") if l.strip()]
    head = next((p for p in phases if p.get("header")), {})
    foot = next((p for p in phases if p.get("footer")), {})
    kernel_ms = (head.get("calib") or {}).get("kernel_ms")
    facts = head.get("facts", {})
    print(f"commit {head.get('commit')}, GPU {head.get('uuid')}, dry {head.get('dry')}")
    print(f"setup: namespaces {facts.get('namespaces')}; cgroups {facts.get('cgroups')}; "
          f"socket {facts.get('socket')}; install-probe {facts.get('install_probe')}")
    print(f"calibration: {head.get('calib')}")
    if foot.get("failures"):
        print(f"FAILURES: {foot['failures']}")
    if foot.get("retried"):
        print(f"retried in a weaker setup after: {foot['retried']}")
    print()
    calib_clock = (head.get("calib") or {}).get("sm_clock_mhz")
    clocks = foot.get("clocks") or []
    print("| phase | pod | pid inside | pid on host | tessera's pid label | labels (namespace/pod/container, sharing_mode) "
          "| split | reads with a figure | busy_seconds rate | mean busy_ratio | truth (kernel, calibrated) | SM MHz calibrated / served "
          "| truth band | truth at the serving clock (calibration's MHz) | error to it | error to the band "
          "| error to the calibrated point | kernel time in the run (its CUPTI records) | error to it | within 10 % |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    ok_all = not foot.get("failures")
    for p in phases:
        if "pod" not in p:
            continue
        pod, name = p["pod"], p["phase"]
        rs = [r for r in reads if r["phase"] == name]
        ratio, secs, pids, labels, methods = [], [], set(), set(), set()
        for r in rs:
            ts = next((v for n, l, v in r["rows"] if n == "tessera_last_sample_timestamp_seconds"), None)
            for n, l, v in r["rows"]:
                if l.get("pod") != pod and n != "gpu_compute_split_info":
                    continue
                if n == "gpu_container_busy_ratio":
                    ratio.append(v)
                    labels.add(f'{l.get("namespace")}/{l.get("pod")}/{l.get("container")}, {l.get("sharing_mode")}')
                elif n == "gpu_container_busy_seconds_total" and ts is not None:
                    secs.append((ts, v))
                elif n in ("gpu_process_busy_ratio", "gpu_process_kernels_total", "gpu_process_busy_ratio_lower"):
                    # Series only the probe's reports make: their pid is the one SO_PEERCRED gave.
                    pids.add(l.get("pid"))
                    labels.add(f'{l.get("namespace")}/{l.get("pod")}/{l.get("container")}, {l.get("sharing_mode")}')
                elif n == "gpu_compute_split_info":
                    methods.add(l.get("method"))
        rate = (secs[-1][1] - secs[0][1]) / (secs[-1][0] - secs[0][0]) if len(secs) > 1 and secs[-1][0] > secs[0][0] else None
        mean = sum(ratio) / len(ratio) if ratio else None
        truth, served, band, serving, matched, in_run = None, None, None, None, None, None
        if rs and records:
            in_run = in_run_share(os.path.join(records, f"{name}-{pod}.1"), rs[0]["t"] - LAG, rs[-1]["t"] - LAG)
        if rs and kernel_ms:
            t0, t1 = rs[0]["t"] - LAG, rs[-1]["t"] - LAG
            n0, n1 = at(p["progress"], t0), at(p["progress"], t1)
            if n0 is not None and n1 is not None and t1 > t0:
                truth = (n1 - n0) * kernel_ms / 1000 / (t1 - t0)
                served = serving_clock(clocks, t0, t1)
                scaled = truth * calib_clock / served if served and calib_clock else truth
                band = (min(truth, scaled), max(truth, scaled))
                matched = at_serving_clock((head.get("calib") or {}).get("duties"), clocks, served)
                if matched:
                    serving = (n1 - n0) * matched[0] / 1000 / (t1 - t0)
        fig = rate if rate is not None else mean
        err = (fig - truth) / truth if fig is not None and truth else None
        band_err = band_error(fig, *band) if fig is not None and band else None
        serving_err = (fig - serving) / serving if fig is not None and serving else None
        in_run_err = (fig - in_run) / in_run if fig is not None and in_run else None
        if p.get("mps") and records:
            good = in_run_err is not None and abs(in_run_err) <= TOLERANCE
        elif serving_err is not None:
            good = abs(serving_err) <= TOLERANCE
        else:
            good = band_err is not None and abs(band_err) <= TOLERANCE
        want_pids = {str(p.get("host_pid"))} | ({str(p["worker_host_pid"])} if p.get("worker_host_pid") else set())
        pid_ok = pids == want_pids
        want_mode = "mps" if p.get("mps") else "time-slicing"
        labels_ok = bool(labels) and all(x == f"energy/{pod}/main, {want_mode}" for x in labels)
        if head.get("dry"):
            # The fake NVML's utilization is no tenant's work: only the join is checked.
            want_mode = "time-slicing"
            labels_ok = bool(labels) and all(x == f"energy/{pod}/main, {want_mode}" for x in labels)
            good = True
        ok_all = ok_all and good and pid_ok and labels_ok
        f = lambda v: "—" if v is None else f"{v:.3f}"
        worker_in = f', worker {p["ready"]["worker_pid"]}' if p["ready"].get("worker_pid") else ""
        worker_out = f', worker {p["worker_host_pid"]}' if p.get("worker_host_pid") else ""
        print(f'| {name} | {pod} | {p["ready"].get("pid")} (NSpid {p["ready"].get("nspid")}){worker_in} | {p.get("host_pid")}{worker_out} '
              f'| {",".join(sorted(x for x in pids if x)) or "—"}{"" if pid_ok else " (**not the host PID**)"} '
              f'| {"; ".join(sorted(labels)) or "—"}{"" if labels_ok else " (**not as expected**)"} | {",".join(sorted(m for m in methods if m))} '
              f'| {len(ratio)}/{len(rs)} | {f(rate)} | {f(mean)} | {f(truth)} '
              f'| {calib_clock or "—"} / {"—" if served is None else f"{served:.0f}"} '
              f'| {"—" if band is None else f"{band[0]:.3f}–{band[1]:.3f}"} '
              f'| {"—" if serving is None else f"{serving:.3f} ({matched[1]:.0f})"} '
              f'| {"—" if serving_err is None else f"{serving_err * 100:+.1f} %"} '
              f'| {"—" if band_err is None else f"{band_err * 100:+.1f} %"} '
              f'| {"—" if err is None else f"{err * 100:+.1f} %"} '
              f'| {f(in_run)} | {"—" if in_run_err is None else f"{in_run_err * 100:+.1f} %"} '
              f'| {"yes" if good else "**no**"} |')
    for p in phases:
        if "stray" not in p:
            continue
        rs = [r for r in reads if r["phase"] == p["phase"]]
        probe_series = ("gpu_process_kernels_total", "gpu_process_busy_ratio", "gpu_process_busy_ratio_lower",
                        "gpu_process_busy_ratio_upper")
        seen = sum(1 for r in rs for n, l, v in r["rows"] if n in probe_series and l.get("pid") == str(p["stray"]))
        ok_all = ok_all and seen == 0 and bool(rs)
        print(f'\nstray (a container holding no GPU, its probe writing to the socket; host PID {p["stray"]}): '
              f'{"no probe series in any of the " + str(len(rs)) + " reads" if seen == 0 else f"**{seen} probe series carry its PID**"}')
    print()
    print("what each tenant saw inside its container:")
    for p in phases:
        if "pod" in p:
            r = p["ready"]
            print(f'- {p["phase"]} {p["pod"]}: namespaces {p["namespaces"]}, uid {r.get("uid")}, cgroup '
                  f'{r.get("cgroup")!r}, CUDA_INJECTION64_PATH {r.get("injection")}, socket there '
                  f'{r.get("socket_exists")}, library there {r.get("library_exists")}, per period {r.get("per_period")} '
                  f'matmuls of {r.get("matmul_s", 0) * 1000:.2f} ms, exit {p.get("rc")}')
    print()
    print("all checks passed" if ok_all else "SOME CHECKS FAILED")
    return 0 if ok_all else 1


if __name__ == "__main__":
    sys.exit(main())

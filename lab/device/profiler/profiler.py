"""A tenant that runs its own profiler, and the probe's cost while shared, on one GPU.

  profiler.py drive --out DIR --tessera BIN --probe SO [--commit C]
  profiler.py summarize DIR/results.jsonl        # the table again, from the data
  profiler.py selftest                           # the summary code on made-up reads (no GPU)

Dry run without a GPU (the plumbing, not the numbers): PYTHONPATH=lab/device/profiler/fake
PROFILER_DRY_SCALE=0.3 profiler.py drive --out /tmp/dry --tessera W --probe /dev/null, W a
wrapper that runs lab/device/corpus/fake_tessera.py.

Phases (one H200, time-sliced, tessera reading every second, nothing changed on the GPU):
  calib     each workload alone, without the probe, under torch.profiler: kernel ms per request
            (CUPTI kernel durations from the trace, not CUDA events);
  profiler  a paced eager MLP ("enc", duty 0.3) beside a bf16 GEMM stream ("gemm", duty 0.35),
            both with the probe; the MLP starts torch.profiler 15 s in and stops it 10 s later.
            Once with the probe loading the CUPTI torch loaded, once with the system's CUPTI
            when there is one (the corpus's setting). Every read: each tenant's published figure,
            bounds, NVML's per-process SM utilization, the split's method and why, the truth
            over the read's figure window;
  overhead  a launch-bound loop (tiny kernels as fast as Python launches them) beside the GEMM
            stream, which runs through the whole phase: rounds of one turn without the probe and
            one with it as shipped, plain first in even rounds and probe first in odd ones, so a
            linear drift of the loop cancels; records are on while the device is shared (the probe's
            kernel count says so). Every turn's process warms up and waits at a gate before the
            first round. Launches per second of each turn from 2 s in, each round's change,
            the GEMM stream's realized duty, and the plain turns against each other as the drift
            control (overhead.py plans and reads it).
Env: PHASES (calib,profiler,overhead: all) picks phases, each with the calibration it needs
(PHASES=overhead calibrates the GEMM stream only); OVERHEAD_ROUNDS (6), OVERHEAD_TURN_S (8),
OVERHEAD_TRACED (1: a third turn a round, the probe tracing every launch,
TESSERA_PROBE_OVERHEAD=1).
Writes DIR/results.jsonl (header, calib, one line per phase with every read), DIR/summary.txt,
and DIR/logs.tgz (tessera's and the tenants' logs, the probes' toggle logs)."""
import argparse
import glob
import json
import os
import re
import signal
import subprocess
import sys
import time
import urllib.request

import overhead

HERE = os.path.abspath(__file__)
PORT = 9961
URL = f"http://127.0.0.1:{PORT}"
RUN = "/tmp/tessera-profiler-run"
PROCS = []

# PROFILER_DRY_SCALE shortens every duration for a dry run (below); 1 on the GPU.
SCALE = float(os.environ.get("PROFILER_DRY_SCALE", "1"))
PROF_AT, PROF_FOR, PHASE_S = 15.0 * SCALE, 10.0 * SCALE, 42.0 * SCALE
READ_FROM = 8.0 * SCALE
LEAD = 12.0  # torch import and warm-up before a common start
READY_S = 60.0  # the overhead phase's gate: how long it waits for every tenant to warm up
PHASES = ("calib", "profiler", "overhead")


def log(*a):
    print(time.strftime("%H:%M:%S"), *a, file=sys.stderr, flush=True)


# ---------------------------------------------------------------- tenants (need torch)

def workload(kind):
    import torch
    dev = torch.device("cuda")
    if kind == "enc":
        layers = []
        for _ in range(6):
            layers += [torch.nn.Linear(1024, 4096), torch.nn.GELU(), torch.nn.Linear(4096, 1024),
                       torch.nn.LayerNorm(1024)]
        model = torch.nn.Sequential(*layers).to(dev).half().eval()
        # Large enough a batch that a request is ~1 ms of kernels: the profiler's own trace of
        # 10 s stays small enough to stop in a second or two.
        x = torch.randn(4096, 1024, device=dev, dtype=torch.half)

        def step():
            with torch.no_grad():
                model(x)
        return step
    if kind == "gemm":
        a = torch.randn(8192, 8192, device=dev, dtype=torch.bfloat16)
        b = torch.randn(8192, 8192, device=dev, dtype=torch.bfloat16)

        def step():
            for _ in range(4):
                torch.matmul(a, b)
        return step
    if kind == "tiny":
        y = torch.zeros(1024, device=dev)

        def step():
            for _ in range(overhead.LAUNCHES_PER_STEP):
                y.add_(1.0)
        return step
    raise SystemExit(f"unknown kind {kind}")


def kernel_ms_from_trace(path, requests):
    """Kernel ms per request from a chrome trace torch.profiler exported: CUPTI's durations."""
    with open(path) as f:
        trace = json.load(f)
    events = trace.get("traceEvents", trace if isinstance(trace, list) else [])
    us = sum(e.get("dur", 0) for e in events if e.get("cat") == "kernel" and e.get("ph") == "X")
    return us / 1000.0 / max(1, requests)


def tenant_calib(kind, out):
    import torch
    step = workload(kind)
    for _ in range(20):
        step()
    torch.cuda.synchronize()
    n = 30
    acts = [torch.profiler.ProfilerActivity.CPU, torch.profiler.ProfilerActivity.CUDA]
    with torch.profiler.profile(activities=acts) as prof:
        for _ in range(n):
            step()
        torch.cuda.synchronize()
    trace = out + ".trace.json"
    prof.export_chrome_trace(trace)
    ms = kernel_ms_from_trace(trace, n)
    os.remove(trace)
    t = time.time()
    for _ in range(n):
        step()
    torch.cuda.synchronize()
    wall_ms = (time.time() - t) * 1000 / n
    with open(out, "w") as f:
        json.dump({"kind": kind, "kernel_ms": ms, "wall_ms": wall_ms}, f)


def tenant_run(kind, start, dur, duty, kernel_ms, out, prof_at=None, prof_for=0.0, go=None):
    """Paced requests from `start` for `dur` s (duty 0: as fast as it goes); completion times to
    `out`. With `prof_at`, torch.profiler runs from then for `prof_for` s. With `go`, `start` is
    an offset: once warm, the tenant says so (`out`.ready) and waits for the driver to write the
    common start into `go`."""
    import torch
    step = workload(kind)
    for _ in range(10):
        step()
    torch.cuda.synchronize()
    ready = time.time()
    if go:
        open(out + ".ready", "w").close()
        while not os.path.exists(go):
            time.sleep(0.02)
        with open(go) as f:
            start += float(f.read())
    info = {"kind": kind, "pid": os.getpid(), "done": [], "duty": duty, "start": start, "ready": ready}
    # Coarse sleeps while far from the start: a dozen waiting tenants stay off the CPU the
    # running one launches from.
    while time.time() < start:
        time.sleep(min(0.05, max(0.0, start - time.time())))
    prof = None
    n = 0
    end = start + dur
    while time.time() < end:
        now = time.time()
        if prof_at is not None and prof is None and now >= start + prof_at:
            acts = [torch.profiler.ProfilerActivity.CPU, torch.profiler.ProfilerActivity.CUDA]
            prof = torch.profiler.profile(activities=acts)
            prof.__enter__()
            info["prof_start"] = time.time()
        if prof is not None and "prof_end" not in info and now >= start + prof_at + prof_for:
            prof.__exit__(None, None, None)
            info["prof_end"] = time.time()
        step()
        torch.cuda.synchronize()
        n += 1
        info["done"].append(round(time.time(), 4))
        if duty > 0:
            due = start + n * kernel_ms / 1000.0 / duty
            time.sleep(max(0.0, due - time.time()))
    if prof is not None and "prof_end" not in info:
        prof.__exit__(None, None, None)
        info["prof_end"] = time.time()
    with open(out, "w") as f:
        json.dump(info, f)


# ---------------------------------------------------------------- the driver

def start_proc(args, env, logfile):
    f = open(logfile, "w")
    p = subprocess.Popen(args, env=env, stdout=f, stderr=subprocess.STDOUT, start_new_session=True)
    PROCS.append(p)
    with open(f"{RUN}/pids", "a") as pids:  # run.sh ends what a killed driver left
        pids.write(f"{p.pid}\n")
    return p


def stop(p, grace=5.0):
    if p.poll() is None:
        try:
            os.killpg(p.pid, signal.SIGTERM)
            p.wait(grace)
        except (OSError, subprocess.TimeoutExpired):
            try:
                os.killpg(p.pid, signal.SIGKILL)
            except OSError:
                pass


LINE = re.compile(r'^(gpu_process_[a-z_]+)\{([^}]*)\} (\S+)$')
FAMILIES = {"gpu_process_busy_ratio": "figure", "gpu_process_busy_ratio_lower": "lower",
            "gpu_process_busy_ratio_upper": "upper", "gpu_process_sm_utilization_ratio": "sm",
            "gpu_process_kernels_total": "kernels"}


def parse_metrics(body):
    """pid -> {figure, lower, upper, sm, kernels} from an exposition."""
    out = {}
    for line in body.splitlines():
        m = LINE.match(line)
        if not m or m.group(1) not in FAMILIES:
            continue
        pid = re.search(r'pid="(\d+)"', m.group(2))
        if pid:
            out.setdefault(pid.group(1), {})[FAMILIES[m.group(1)]] = float(m.group(3))
    return out


def parse_debug(dbg):
    """GPU 0's split from /debug/attribution: method, why, profiler pids, the figure window, and
    NVML's per-process SM utilization."""
    for g in dbg.get("gpus", []):
        c = g.get("compute", {})
        return {"method": c.get("method"), "why": c.get("why") or "", "profiler": c.get("profiler", []),
                "window": c.get("figure_window"), "device": c.get("device_activity"),
                "disputed": c.get("disputed", []),
                "nvml": {str(p.get("pid")): p.get("sm_utilization") for p in g.get("processes", [])}}
    return {}


def read_once():
    body = urllib.request.urlopen(URL + "/metrics", timeout=3).read().decode()
    dbg = json.loads(urllib.request.urlopen(URL + "/debug/attribution", timeout=3).read())
    return {"t": round(time.time(), 2), "p": parse_metrics(body), "gpu": parse_debug(dbg)}


def watch(t0, t1):
    reads = []
    while time.time() < t0:
        time.sleep(0.01)
    while time.time() < t1:
        t = time.time()
        try:
            reads.append(read_once())
        except Exception as e:  # recorded, not retried
            reads.append({"t": round(t, 2), "error": f"{type(e).__name__}: {e}"})
        time.sleep(max(0.0, 1.0 - (time.time() - t)))
    return reads


def tenant_env(probe, cupti, extra=None):
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    env.pop("CUDA_INJECTION64_PATH", None)
    if probe:
        env["CUDA_INJECTION64_PATH"] = probe
        if cupti:
            env["TESSERA_PROBE_CUPTI"] = cupti
    env.update(extra or {})
    return env


def run_tenants(specs, dur, read_from):
    """specs: (name, argv, env). Starts them together; reads tessera; their results."""
    start = time.time() + LEAD
    procs = {}
    for name, argv, env in specs:
        procs[name] = start_proc([sys.executable, HERE, "tenant", *argv, "--start", str(start),
                                  "--dur", str(dur), "--out", f"{RUN}/{name}.json"], env, f"{RUN}/logs/{name}.log")
    reads = watch(start + read_from, start + dur)
    return start, reads, collect(procs)


def collect(procs):
    res = {}
    for name, p in procs.items():
        try:
            p.wait(30)
        except subprocess.TimeoutExpired:
            stop(p)
        try:
            with open(f"{RUN}/{name}.json") as f:
                res[name] = json.load(f)
        except (OSError, ValueError):
            res[name] = {"error": "no result", "rc": p.returncode}
    return res


def run_rounds(probe, cupti, calib):
    """overhead.schedule()'s turns of the launch-bound loop, a process each, beside one GEMM
    stream through all of them. All start at once and wait, warm, at a gate: the clock starts
    when the last is ready, so no torch import or CUDA context creation falls in a turn."""
    turns = overhead.schedule(overhead.ROUNDS, overhead.TRACED)
    total = overhead.TURN_S * len(turns)
    go = f"{RUN}/go"
    tenant = [sys.executable, HERE, "tenant"]
    spawned = time.time()
    procs = {overhead.GEMM: start_proc(
        tenant + ["gemm", "--duty", str(overhead.DUTY), "--kernel-ms", str(calib["gemm"]["kernel_ms"]),
                  "--start", "0", "--dur", str(total), "--go", go, "--out", f"{RUN}/{overhead.GEMM}.json"],
        tenant_env(probe, cupti), f"{RUN}/logs/{overhead.GEMM}.log")}
    for t in turns:
        with_probe, extra = overhead.VARIANTS[t["variant"]]
        procs[t["name"]] = start_proc(
            tenant + ["tiny", "--duty", "0", "--start", str(t["offset"]), "--dur",
                      str(overhead.TURN_S - overhead.TURN_GAP), "--go", go, "--out", f"{RUN}/{t['name']}.json"],
            tenant_env(probe if with_probe else None, cupti, extra), f"{RUN}/logs/{t['name']}.log")
    waiting = set(procs)
    while waiting and time.time() < spawned + READY_S:
        time.sleep(0.1)
        waiting = {n for n in waiting if procs[n].poll() is None and not os.path.exists(f"{RUN}/{n}.json.ready")}
    ready_s = time.time() - spawned
    base = time.time() + 1.0  # every tenant polls the gate well within this
    with open(go + ".tmp", "w") as f:
        f.write(repr(base))
    os.rename(go + ".tmp", go)
    log(f"overhead: ready after {ready_s:.1f} s (not ready: {sorted(waiting) or 'none'}); "
        f"{len(turns)} turns, {total:.0f} s")
    reads = watch(base, base + total)
    return {"base": base, "ready_s": ready_s, "not_ready": sorted(waiting), "turns": turns,
            "tenants": collect(procs), "reads": reads}


def torch_cupti():
    """The libcupti torch loaded, if it ships its own (pip wheels: nvidia-cuda-cupti-*)."""
    code = ("import torch, glob, os\n"
            "torch.zeros(1, device='cuda')\n"
            "for l in open('/proc/self/maps'):\n"
            "    if 'libcupti' in l: print(l.split()[-1]); break\n"
            "else:\n"
            "    import nvidia, os.path as p\n"
            "    for d in nvidia.__path__:\n"
            "        c = sorted(glob.glob(p.join(d, 'cuda_cupti', 'lib', 'libcupti.so*')))\n"
            "        if c: print(c[-1]); break\n")
    try:
        out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120).stdout
        return out.strip().splitlines()[-1] if out.strip() else None
    except (OSError, subprocess.SubprocessError, IndexError):
        return None


def phases_asked():
    asked = [p for p in re.split(r"[,\s]+", os.environ.get("PHASES", ",".join(PHASES))) if p]
    if not asked or set(asked) - set(PHASES):
        raise SystemExit(f"PHASES={os.environ.get('PHASES')}: pick from {','.join(PHASES)}")
    if "overhead" in asked:
        overhead.check_settings()
    return asked


def drive(a):
    phases = phases_asked()
    os.makedirs(a.out, exist_ok=True)
    subprocess.run(["rm", "-rf", RUN])
    os.makedirs(f"{RUN}/logs")
    socket = f"{RUN}/probe.sock"
    env = dict(os.environ, TESSERA_METRICS_DETAIL="full")
    env.pop("CUDA_INJECTION64_PATH", None)
    tessera = start_proc([a.tessera, f"--web.listen-address=127.0.0.1:{PORT}", "--sample.interval=1s",
                          "--nvml.process-interval=1s", "--kubelet.enabled=false", "--kube.enabled=false",
                          "--web.enable-debug=true", f"--probe.socket={socket}"], env, f"{RUN}/logs/tessera.log")
    os.environ["TESSERA_PROBE_SOCKET"] = socket
    out = open(f"{a.out}/results.jsonl", "w")
    system = sorted(glob.glob("/usr/local/cuda*/extras/CUPTI/lib64/libcupti.so*") +
                    glob.glob("/usr/lib/x86_64-linux-gnu/libcupti.so*"))
    system = system[-1] if system else None
    own = torch_cupti()
    try:
        card = subprocess.run(["nvidia-smi", "--query-gpu=name,driver_version", "--format=csv,noheader"],
                              capture_output=True, text=True, timeout=20).stdout.strip()
    except (OSError, subprocess.SubprocessError) as e:
        card = f"nvidia-smi: {e}"
    out.write(json.dumps({"type": "header", "commit": a.commit, "card": card, "torch_cupti": own,
                          "system_cupti": system, "started": time.time(), "phases": phases,
                          "overhead": {"rounds": overhead.ROUNDS, "turn_s": overhead.TURN_S,
                                       "traced": overhead.TRACED}}) + "\n")
    calib = {}
    kinds = ("enc", "gemm") if {"calib", "profiler"} & set(phases) else ("gemm",)
    for kind in kinds:
        path = f"{RUN}/calib-{kind}.json"
        subprocess.run([sys.executable, HERE, "calib", kind, path], env=tenant_env(None, None),
                       stdout=open(f"{RUN}/logs/calib-{kind}.log", "w"), stderr=subprocess.STDOUT, timeout=180)
        try:
            calib[kind] = json.load(open(path))
        except (OSError, ValueError):
            calib[kind] = {"error": "calibration failed"}
    out.write(json.dumps({"type": "calib", "calib": calib}) + "\n")
    log("calibrated", calib)
    if any("kernel_ms" not in calib[k] for k in kinds):
        out.write(json.dumps({"type": "footer", "error": "calibration failed"}) + "\n")
        out.close()
        stop(tessera)
        return
    variants = [("torch-cupti", own)] + ([("system-cupti", system)] if system and system != own else [])
    for name, cupti in variants if "profiler" in phases else []:
        trace = {"TESSERA_PROBE_TRACE_LOG": f"{RUN}/logs/toggles-{name}"}
        specs = [("enc-" + name, ["enc", "--duty", "0.3", "--kernel-ms", str(calib["enc"]["kernel_ms"]),
                                  "--prof-at", str(PROF_AT), "--prof-for", str(PROF_FOR)],
                  tenant_env(a.probe, cupti, {"TESSERA_PROBE_TRACE_LOG": trace["TESSERA_PROBE_TRACE_LOG"] + "-enc"})),
                 ("gemm-" + name, ["gemm", "--duty", "0.35", "--kernel-ms", str(calib["gemm"]["kernel_ms"])],
                  tenant_env(a.probe, cupti, {"TESSERA_PROBE_TRACE_LOG": trace["TESSERA_PROBE_TRACE_LOG"] + "-gemm"}))]
        log("phase profiler", name, cupti)
        start, reads, res = run_tenants(specs, PHASE_S, READ_FROM)
        # What each probe noted: records on and off, CUPTI lost to the profiler and regained.
        toggles = {}
        for who in ("enc", "gemm"):
            try:
                with open(f"{trace['TESSERA_PROBE_TRACE_LOG']}-{who}") as f:
                    toggles[who] = [l.split()[0] for l in f if l.strip()]
            except OSError:
                toggles[who] = None
        out.write(json.dumps({"type": "profiler", "variant": name, "cupti": cupti, "start": start,
                              "calib": calib, "tenants": res, "reads": reads, "toggles": toggles}) + "\n")
        out.flush()
    if "overhead" in phases:
        log("phase overhead")
        res = run_rounds(a.probe, own, calib)
        out.write(json.dumps({"type": "overhead", "turn_s": overhead.TURN_S, "from": overhead.TURN_FROM,
                              "gap": overhead.TURN_GAP, "duty": overhead.DUTY, "calib": calib,
                              "launches_per_step": overhead.LAUNCHES_PER_STEP, **res}) + "\n")
    stop(tessera)
    for p in PROCS:
        stop(p, 1.0)
    out.write(json.dumps({"type": "footer", "ended": time.time()}) + "\n")
    out.close()
    text = summarize(f"{a.out}/results.jsonl")
    with open(f"{a.out}/summary.txt", "w") as f:
        f.write(text)
    print(text)
    subprocess.run(["tar", "czf", f"{a.out}/logs.tgz", "-C", RUN, "logs"], check=False)


# ---------------------------------------------------------------- the summary (no torch)

def truth(done, kernel_ms, window):
    """Kernel time over the window as a share of it: requests completed inside it."""
    lo, hi = window
    n = sum(1 for t in done if lo < t <= hi)
    return n * kernel_ms / 1000.0 / (hi - lo) if hi > lo else None


def classify(read, pid, prof, lag=2.0):
    """For one read of one tenant: whether the profiler ran in its figure window (or the
    window is unknown and the read falls while it ran, `lag` for the timelines' delay), and what
    was published."""
    g = read.get("gpu", {})
    w = g.get("window")
    p = read.get("p", {}).get(str(pid), {})
    ps, pe = prof if prof else (None, None)
    if ps is None:
        during = False
    elif w:
        during = w[0] < pe and w[1] > ps
    else:
        during = ps <= read["t"] <= pe + lag
    return {"during": during, "figure": p.get("figure"), "lower": p.get("lower"), "upper": p.get("upper"),
            "nvml": g.get("nvml", {}).get(str(pid)), "why_profiler": g.get("why", "").startswith("profiler"),
            "method": g.get("method"), "window": w}


def profiler_rows(rec):
    """Per tenant of a profiler phase: reads while the profiler ran (withheld with the reason,
    published, published low) and outside it (published, within 10 % of the truth); NVML's
    per-process figure's error beside tessera's."""
    calib = rec["calib"]
    ten = rec["tenants"]
    prof = None
    for r in ten.values():
        if "prof_start" in r:
            prof = (r["prof_start"], r.get("prof_end", r["prof_start"] + PROF_FOR))
    rows = []
    for name, r in sorted(ten.items()):
        if "pid" not in r:
            rows.append({"tenant": name, "error": r.get("error", "no pid")})
            continue
        km = calib.get(r["kind"], {}).get("kernel_ms")
        row = {"tenant": name, "profiled": "prof_start" in r, "during": 0, "during_withheld_profiler": 0,
               "during_published": 0, "during_low": 0, "outside": 0, "outside_published": 0,
               "outside_within10": 0, "nvml_within10": 0, "nvml_reads": 0, "err": [], "nvml_err": []}
        for read in rec["reads"]:
            if "error" in read:
                continue
            c = classify(read, r["pid"], prof)
            w = c["window"] or [read["t"] - 5.0, read["t"]]
            tr = truth(r["done"], km, w) if km else None
            if c["during"]:
                row["during"] += 1
                if c["figure"] is None and c["why_profiler"]:
                    row["during_withheld_profiler"] += 1
                if c["figure"] is not None:
                    row["during_published"] += 1
                    if tr and c["figure"] < 0.9 * tr:
                        row["during_low"] += 1
            else:
                row["outside"] += 1
                if c["figure"] is not None:
                    row["outside_published"] += 1
                    if tr:
                        e = c["figure"] / tr - 1
                        row["err"].append(round(e, 4))
                        row["outside_within10"] += abs(e) <= 0.1
            if c["nvml"] is not None and tr:
                e = c["nvml"] / tr - 1
                row["nvml_reads"] += 1
                row["nvml_err"].append(round(e, 4))
                row["nvml_within10"] += abs(e) <= 0.1
        rows.append(row)
    return prof, rows


def median(xs):
    xs = sorted(xs)
    return xs[len(xs) // 2] if xs else None


def summarize(path):
    lines = []
    with open(path) as f:
        recs = [json.loads(l) for l in f if l.strip()]
    for rec in recs:
        if rec["type"] == "header":
            lines.append(f"card {rec.get('card')}  commit {rec.get('commit')}  torch cupti {rec.get('torch_cupti')}"
                         f"  system cupti {rec.get('system_cupti')}")
        elif rec["type"] == "calib":
            lines.append("calibration (kernel ms per request, CUPTI): " +
                         ", ".join(f"{k} {v.get('kernel_ms', float('nan')):.3f}" for k, v in rec["calib"].items()))
        elif rec["type"] == "profiler":
            prof, rows = profiler_rows(rec)
            span = f"{prof[1] - prof[0]:.1f} s" if prof else "never started"
            lines.append(f"\nprofiler phase, probe's CUPTI {rec['variant']} ({rec.get('cupti')}); profiler {span}")
            for who, t in (rec.get("toggles") or {}).items():
                lines.append(f"  {who} probe noted: {' '.join(t) if t else t}")
            lines.append(f"{'tenant':18} {'prof':>4} {'during':>6} {'w/held':>6} {'publ':>5} {'low':>4} "
                         f"{'outside':>7} {'publ':>5} {'<=10%':>5} {'med err':>8} {'nvml<=10%':>9} {'nvml med':>8}")
            for r in rows:
                if "error" in r:
                    lines.append(f"{r['tenant']:18} {r['error']}")
                    continue
                me, mn = median(r["err"]), median(r["nvml_err"])
                lines.append(f"{r['tenant']:18} {'yes' if r['profiled'] else 'no':>4} {r['during']:6} "
                             f"{r['during_withheld_profiler']:6} {r['during_published']:5} {r['during_low']:4} "
                             f"{r['outside']:7} {r['outside_published']:5} {r['outside_within10']:5} "
                             f"{'-' if me is None else f'{me:+.3f}':>8} "
                             f"{r['nvml_within10']:4}/{r['nvml_reads']:<4} {'-' if mn is None else f'{mn:+.3f}':>8}")
        elif rec["type"] == "overhead":
            lines += overhead.summary_lines(rec)
        elif rec["type"] == "footer" and rec.get("error"):
            lines.append(f"footer: {rec['error']}")
    return "\n".join(lines) + "\n"


def selftest():
    """The summary on made-up reads: a profiled tenant withheld with the reason while the
    profiler runs, one published low read, NVML's figure beside; the overhead phase's rounds
    (overhead.selftest)."""
    import tempfile
    t0 = 1000.0
    done_p = [t0 + i * 0.01 for i in range(4000)]  # 1 ms kernels every 10 ms: truth 0.1
    done_c = [t0 + i * 0.02 for i in range(2000)]  # 6 ms every 20 ms: 0.3
    reads = []
    for s in range(8, 40):
        t = t0 + s
        w = [t - 7, t - 2]
        during = w[0] < t0 + 25 and w[1] > t0 + 15
        fig_p = None if during else 0.1
        if s == 36:
            fig_p = 0.05  # after the profiler: an outside read off by half
        reads.append({"t": t, "p": {"11": {"figure": fig_p, "sm": 0.5}, "12": {"figure": None if during else 0.3}},
                      "gpu": {"window": w, "why": "profiler: ..." if during else "CUDA probe timelines",
                              "nvml": {"11": 0.5, "12": 0.0}, "method": "withheld" if during else "probe"}})
    reads[12]["gpu"]["window"] = None  # t0 + 20: while the profiler runs by the read's time
    rec = {"type": "profiler", "variant": "test", "calib": {"enc": {"kernel_ms": 1.0}, "gemm": {"kernel_ms": 6.0}},
           "tenants": {"enc": {"kind": "enc", "pid": 11, "done": done_p, "prof_start": t0 + 15, "prof_end": t0 + 25},
                       "gemm": {"kind": "gemm", "pid": 12, "done": done_c}}, "reads": reads}
    prof, rows = profiler_rows(rec)
    assert prof == (t0 + 15, t0 + 25), prof
    enc = next(r for r in rows if r["tenant"] == "enc")
    gemm = next(r for r in rows if r["tenant"] == "gemm")
    assert enc["during"] > 0 and enc["during_withheld_profiler"] == enc["during"], enc
    assert enc["during_published"] == 0 and gemm["during_published"] == 0, (enc, gemm)
    assert enc["outside_published"] == enc["outside"] and enc["outside_within10"] == enc["outside"] - 1, enc
    assert enc["nvml_within10"] == 0, enc
    assert abs(truth(done_c, 6.0, [t0 + 10, t0 + 15]) - 0.3) < 0.01
    ovh = {"type": "overhead", "start": t0, "from": 10, "reads": [
        {"p": {"21": {"kernels": 0}}}, {"p": {"21": {"kernels": 5000}}}],
        "tenants": {"tiny-plain": {"pid": 20, "start": t0, "done": [t0 + 10 + i * 0.01 for i in range(101)]},
                    "tiny-probe": {"pid": 21, "start": t0 + 20, "done": [t0 + 30 + i * 0.0125 for i in range(81)]},
                    "gemm-ovh": {"pid": 22, "done": []}}}
    rounds = overhead.selftest()  # the rounds' plan and reading; `ovh` a record from before them
    with tempfile.NamedTemporaryFile("w", suffix=".jsonl", delete=False) as f:
        for r in ({"type": "header", "card": "test"}, {"type": "calib", "calib": rec["calib"]}, rec, ovh, rounds):
            f.write(json.dumps(r) + "\n")
    text = summarize(f.name)
    os.remove(f.name)
    assert "enc" in text and "-20.0% vs plain" in text and "probe saw 5000 kernels" in text, text
    assert "probe vs plain, 6 of 6 rounds: median -9.9%" in text and "this run separates" in text, text
    body = 'gpu_process_busy_ratio{node="n",pid="7",sharing_mode="time-slicing"} 0.25\n' \
           'gpu_process_kernels_total{pid="7"} 12\n# HELP x\n'
    assert parse_metrics(body) == {"7": {"figure": 0.25, "kernels": 12.0}}
    print(text)
    print("selftest ok")


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="cmd", required=True)
    d = sub.add_parser("drive")
    d.add_argument("--out", required=True)
    d.add_argument("--tessera", required=True)
    d.add_argument("--probe", required=True)
    d.add_argument("--commit", default="unknown")
    c = sub.add_parser("calib")
    c.add_argument("kind")
    c.add_argument("path")
    t = sub.add_parser("tenant")
    t.add_argument("kind")
    t.add_argument("--duty", type=float, default=0.0)
    t.add_argument("--kernel-ms", type=float, default=1.0)
    t.add_argument("--prof-at", type=float)
    t.add_argument("--prof-for", type=float, default=0.0)
    t.add_argument("--start", type=float, required=True)
    t.add_argument("--dur", type=float, required=True)
    t.add_argument("--out", required=True)
    t.add_argument("--go")
    s = sub.add_parser("summarize")
    s.add_argument("path")
    sub.add_parser("selftest")
    a = p.parse_args()
    if a.cmd == "drive":
        try:
            drive(a)
        finally:
            for q in PROCS:
                stop(q, 1.0)
    elif a.cmd == "calib":
        tenant_calib(a.kind, a.path)
    elif a.cmd == "tenant":
        tenant_run(a.kind, a.start, a.dur, a.duty, a.kernel_ms, a.out, a.prof_at, a.prof_for, a.go)
    elif a.cmd == "summarize":
        print(summarize(a.path), end="")
    else:
        selftest()


if __name__ == "__main__":
    main()

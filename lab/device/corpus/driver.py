"""The exact-mode corpus (issue 32): draws cases at random from a seed fixed in advance, runs
them on GPU 0 with real-framework tenants (tenants.py) that carry the CUDA probe, reads tessera
every second, and writes every draw, good or bad, to one JSON-lines file.

  driver.py --out DIR --budget S --seed N --tessera BIN --probe SO [--commit C]

Phases, each cut to what is left of the budget (the plan is written first, so a draw not run
shows as not run, never as dropped):
  1. calibration: every kind built at once without the probe, then measured one at a time
     (tenants.py calib): solo kernel ms and event ms per request class;
  2. time-sliced: a pool of warmed tenants (some of them lying probes) carrying the probe;
     each draw wakes 2-6 of them with a duty, an arrival process and a seed;
  3. MPS: the same with a private MPS daemon (pipe and log folders under /tmp), quit at the end.
Never changes GPU settings.

Dry run without a GPU (checks the plumbing, not the numbers): CORPUS_FAKE=1 with
PYTHONPATH=lab/device/corpus (fake_torch.py: requests sleep) and --tessera pointing at a
wrapper that runs fake_tessera.py; --dur 8 --skip 2 --budget 130."""
import argparse
import json
import os
import random
import re
import shutil
import signal
import subprocess
import sys
import threading
import time
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
TENANTS = os.path.join(HERE, "tenants.py")
KINDS = ["hf-graph", "hf-eager", "timm", "st-embed", "train", "cbatch", "ddp", "holder", "gemm"]
# Pool slots: (slot, kind, liar). Two of the common serving kinds, one of the rest.
TS_POOL = [("hf-graph-0", "hf-graph", None), ("hf-graph-1", "hf-graph", None),
           ("hf-eager-0", "hf-eager", None), ("timm-0", "timm", None), ("timm-1", "timm", None),
           ("st-embed-0", "st-embed", None), ("train-0", "train", None),
           ("cbatch-0", "cbatch", None), ("ddp-0", "ddp", None), ("holder-0", "holder", None),
           ("liar-under", "gemm", "under"), ("liar-over", "gemm", "over"),
           ("liar-silent", "gemm", "silent")]
MPS_POOL = [("hf-graph-0", "hf-graph", None), ("hf-graph-1", "hf-graph", None),
            ("hf-eager-0", "hf-eager", None), ("timm-0", "timm", None),
            ("st-embed-0", "st-embed", None), ("cbatch-0", "cbatch", None),
            ("train-0", "train", None), ("holder-0", "holder", None),
            ("liar-under", "gemm", "under")]
# Issue 42's heavy class: kernel-bound tenants (and a launch-bound one) that keep the device
# busy, each asking at least 0.1 of it as kernel time. The forgers carry the real probe behind a
# relay that scales its frames (tenants.py, ForgingRelay).
# Launch-bound kinds that cannot deliver a tenth of the device as kernel time (continuous
# batching: 0.03-0.09 in run 12) are the light class's.
HEAVY_KINDS = ["enc-graph", "enc-eager", "gemm6k", "mlp-train", "timm-big", "holder"]
HEAVY_TS_POOL = [("enc-graph-0", "enc-graph", None), ("enc-graph-1", "enc-graph", None),
                 ("enc-eager-0", "enc-eager", None), ("gemm6k-0", "gemm6k", None),
                 ("mlp-train-0", "mlp-train", None), ("timm-big-0", "timm-big", None),
                 ("holder-0", "holder", None),
                 ("forge-over20", "gemm6k", "forge-over20"), ("forge-under20", "enc-graph", "forge-under20"),
                 ("forge-over50", "enc-graph", "forge-over50"), ("forge-under50", "gemm6k", "forge-under50")]
HEAVY_MPS_POOL = [("enc-graph-0", "enc-graph", None), ("enc-graph-1", "enc-graph", None),
                  ("enc-eager-0", "enc-eager", None), ("gemm6k-0", "gemm6k", None),
                  ("mlp-train-0", "mlp-train", None), ("timm-big-0", "timm-big", None),
                  ("holder-0", "holder", None),
                  ("forge-over20", "gemm6k", "forge-over20"), ("forge-under20", "enc-graph", "forge-under20")]
# Issue 54's long-kernel class: tenants whose kernels run 2-12 ms and more (a 16k GEMM stream, a
# long-prompt prefill, a large-batch convolution), each beside the launch-bound eager decoder
# and beside a graph-served encoder, time-sliced and under MPS.
LONG_KINDS = ["gemm16k", "prefill", "conv-big"]
LONG_TS_POOL = [("gemm16k-0", "gemm16k", None), ("prefill-0", "prefill", None),
                ("conv-big-0", "conv-big", None), ("dec-eager-0", "dec-eager", None),
                ("enc-graph-0", "enc-graph", None)]
LONG_MPS_POOL = list(LONG_TS_POOL)
# Who runs beside whom: every long kind beside the decoder and beside the graph encoder, and the
# 16k GEMM (the case) beside both at once; drawn in this order, duties from the seed.
LONG_TS_PAIRS = [("gemm16k", "dec-eager"), ("gemm16k", "enc-graph"), ("prefill", "dec-eager"),
                 ("conv-big", "enc-graph"), ("gemm16k", "dec-eager", "enc-graph"),
                 ("prefill", "enc-graph"), ("conv-big", "dec-eager"), ("gemm16k", "dec-eager"),
                 ("gemm16k", "enc-graph"), ("prefill", "dec-eager")]
LONG_MPS_PAIRS = [("gemm16k", "enc-graph"), ("gemm16k", "dec-eager"), ("prefill", "enc-graph"),
                  ("conv-big", "dec-eager"), ("gemm16k", "dec-eager", "enc-graph")]
DUR, SKIP, LEAD = 22.0, 10.0, 2.0
PORT = 9950
URL = f"http://127.0.0.1:{PORT}"
RUN = "/tmp/corpus-run"
PROCS = []  # every process this driver started, ended by pid at the end
RECORD_LOG = False


def log(*a):
    print(time.strftime("%H:%M:%S"), *a, file=sys.stderr, flush=True)


def plan(seed, n, mode, pool):
    """n draws for one pool: 2-6 tenants, one a liar in a quarter of them, duties summing to
    0.3-0.9, arrivals poisson / bursty / periodic (a training job's loader: periodic)."""
    rng = random.Random(f"{seed}-{mode}")
    honest = [s for s in pool if s[2] is None]
    liars = [s for s in pool if s[2] is not None]
    out = []
    for k in range(n):
        m = rng.randint(2, min(6, len(honest)))
        chosen = rng.sample(honest, m)
        if liars and rng.random() < 0.25:
            chosen[rng.randrange(m)] = rng.choice(liars)
        total = rng.uniform(0.3, 0.9)
        raw = [rng.uniform(0.2, 1.0) for _ in chosen]
        tenants = []
        for (slot, kind, liar), r in zip(chosen, raw):
            arrival = "periodic" if kind in ("train", "ddp") else rng.choice(["poisson", "poisson", "bursty", "periodic"])
            tenants.append({"slot": slot, "kind": kind, "liar": liar, "duty": round(total * r / sum(raw), 3),
                            "arrival": arrival, "seed": rng.randrange(1 << 30)})
        out.append({"draw": f"{mode}-{k}", "mode": mode, "tenants": tenants})
    return out


def plan_heavy(seed, n, mode, pool):
    """n heavy draws (issue 42): 2-4 honest tenants of the heavy kinds asking 0.55-0.95 of the
    device as kernel time between them, each at least 0.1; a memory holder beside them in a
    quarter of the draws; a forging liar in place of one tenant in a third of them."""
    rng = random.Random(f"{seed}-heavy-{mode}")
    honest = [s for s in pool if s[2] is None and s[1] != "holder"]
    holders = [s for s in pool if s[1] == "holder"]
    forgers = [s for s in pool if s[2] is not None]
    out = []
    for k in range(n):
        m = rng.randint(2, min(4, len(honest)))
        chosen = rng.sample(honest, m)
        if forgers and rng.random() < 1 / 3:
            chosen[rng.randrange(m)] = rng.choice(forgers)
        total = rng.uniform(0.55, 0.95)
        raw = [rng.uniform(0.2, 1.0) for _ in chosen]
        spare = total - 0.1 * m
        tenants = []
        for (slot, kind, liar), r in zip(chosen, raw):
            arrival = "periodic" if kind == "mlp-train" else rng.choice(["poisson", "poisson", "bursty", "periodic"])
            tenants.append({"slot": slot, "kind": kind, "liar": liar,
                            "duty": round(0.1 + spare * r / sum(raw), 3), "arrival": arrival,
                            "seed": rng.randrange(1 << 30)})
        if holders and rng.random() < 0.25:
            slot, kind, _ = holders[0]
            tenants.append({"slot": slot, "kind": kind, "liar": None, "duty": 0.0, "arrival": "poisson",
                            "seed": rng.randrange(1 << 30)})
        out.append({"draw": f"heavy-{mode}-{k}", "mode": mode, "class": "heavy", "rate_by": "kernel",
                    "tenants": tenants})
    return out


def plan_long(seed, mode, pairs):
    """Issue 54's long-kernel draws: each combination of `pairs` once, in order; a long kind asks
    0.25-0.5 of the device as kernel time, the graph encoder 0.15-0.35, the eager decoder
    0.12-0.2 (launch-bound: it cannot deliver much more as kernel time)."""
    rng = random.Random(f"{seed}-long-{mode}")
    asked = {"enc-graph": (0.15, 0.35), "dec-eager": (0.12, 0.2)}
    out = []
    for k, kinds in enumerate(pairs):
        tenants = []
        for kind in kinds:
            lo, hi = asked.get(kind, (0.25, 0.5))
            tenants.append({"slot": f"{kind}-0", "kind": kind, "liar": None, "duty": round(rng.uniform(lo, hi), 3),
                            "arrival": rng.choice(["poisson", "poisson", "bursty", "periodic"]),
                            "seed": rng.randrange(1 << 30)})
        out.append({"draw": f"long-{mode}-{k}", "mode": mode, "class": "long", "rate_by": "kernel",
                    "tenants": tenants})
    return out


def start(args, env=None, out=None):
    f = open(out, "w") if out else subprocess.DEVNULL
    p = subprocess.Popen(args, env=env, stdout=f, stderr=subprocess.STDOUT, start_new_session=True)
    PROCS.append(p)
    with open(f"{RUN}/pids", "a") as f:  # run.sh ends what a killed driver left
        f.write(f"{p.pid}\n")
    return p


def stop(p, grace=5.0):
    if p.poll() is None:
        try:
            os.killpg(p.pid, signal.SIGTERM)
        except OSError:
            pass
        try:
            p.wait(grace)
        except subprocess.TimeoutExpired:
            try:
                os.killpg(p.pid, signal.SIGKILL)
            except OSError:
                pass


def quiet_run(args, stdin=None):
    """A command's output, or its failure as text: a missing tool is reported, not fatal."""
    try:
        return subprocess.run(args, input=stdin, capture_output=True, text=True, timeout=20).stdout.strip()
    except (OSError, subprocess.SubprocessError) as e:
        return f"{args[0]}: {e}"


def gpus():
    try:
        out = subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True, timeout=20).stdout
        return sum(1 for line in out.splitlines() if line.startswith("GPU "))
    except (OSError, subprocess.SubprocessError):
        return 0


def calibrate(run, kinds, deadline, failures):
    os.makedirs(f"{run}/built", exist_ok=True)
    os.makedirs(f"{run}/calib", exist_ok=True)
    env = {k: v for k, v in os.environ.items() if k != "CUDA_INJECTION64_PATH"}
    procs = {}
    for kind in kinds:
        for rank in ([0, 1] if kind == "ddp" else [0]):
            procs[(kind, rank)] = start([sys.executable, TENANTS, "calib", kind, f"{run}/calib/{kind}-{rank}.json",
                                         f"{run}/calib.lock", "--rank", str(rank), "--store", run],
                                        env, f"{run}/calib-{kind}-{rank}.log")
    # Everyone built (or gone), or the build deadline: then measure, one at a time.
    build_by = time.time() + (deadline - time.time()) * 0.7
    while time.time() < build_by:
        built = set(os.listdir(f"{run}/built"))
        if all(f"{k}-{r}" in built or p.poll() is not None for (k, r), p in procs.items()):
            break
        time.sleep(0.2)
    open(f"{run}/go", "w").close()
    # A build still running now warms kernels beside the others' measurements: say which.
    late = [f"{k}-{r}" for (k, r) in procs if f"{k}-{r}" not in os.listdir(f"{run}/built")]
    if late:
        failures.append({"phase": "calibration", "error": "built after the measurements began", "kinds": late})
    for (kind, rank), p in procs.items():
        try:
            p.wait(max(1.0, deadline - time.time()))
        except subprocess.TimeoutExpired:
            stop(p)
        if not os.path.exists(f"{run}/calib/{kind}-{rank}.json"):
            failures.append({"phase": "calibration", "kind": kind, "rank": rank, "rc": p.returncode,
                             "log": tail(f"{run}/calib-{kind}-{rank}.log")})
    return {f"{k}-{r}": json.load(open(f"{run}/calib/{k}-{r}.json"))
            for (k, r) in procs if os.path.exists(f"{run}/calib/{k}-{r}.json")}


def tail(path, n=1500):
    try:
        with open(path, errors="replace") as f:
            return f.read()[-n:]
    except OSError:
        return None


def start_pool(run, phase, pool, probe, deadline, failures, two_gpus):
    for d in ("ready", "ctl", "res"):
        shutil.rmtree(f"{run}/{d}", ignore_errors=True)
        os.makedirs(f"{run}/{d}")
    procs = {}
    for slot, kind, liar in pool:
        if kind == "ddp" and not two_gpus:
            failures.append({"phase": phase, "slot": slot, "error": "fewer than 2 GPUs"})
            continue
        if not os.path.exists(f"{run}/calib/{kind}-0.json"):
            failures.append({"phase": phase, "slot": slot, "error": "no calibration"})
            continue
        env = dict(os.environ, CORPUS_PHASE=phase)
        if not liar or liar.startswith("forge"):
            env["CUDA_INJECTION64_PATH"] = probe
        if RECORD_LOG:
            os.makedirs(f"{run}/rec", exist_ok=True)
            env["TESSERA_PROBE_RECORD_LOG"] = f"{run}/rec/{phase}-{slot}"
            env.setdefault("TESSERA_PROBE_RECORD_LOG_MB", "48")
        if phase == "alone":
            # Records on although alone: the probe's own kernel time beside NVML's and the
            # calibrated truth (issue 42, "check the truth").
            env["TESSERA_PROBE_RECORDS"] = "always"
        for rank in ([0, 1] if kind == "ddp" else [0]):
            name = slot if rank == 0 else f"{slot}r1"
            args = [sys.executable, TENANTS, "pool", kind, name, run, "--rank", str(rank)]
            procs[name] = start(args + (["--liar", liar] if liar else []), env, f"{run}/{phase}-{name}.log")
    while time.time() < deadline:
        if all(os.path.exists(f"{run}/ready/{n}") or p.poll() is not None for n, p in procs.items()):
            break
        time.sleep(0.2)
    ready = {}
    for name, p in procs.items():
        info = None
        try:
            with open(f"{run}/ready/{name}") as f:
                info = json.load(f)
        except (OSError, ValueError):
            pass
        if info and p.poll() is None:
            ready[name] = info
        else:
            failures.append({"phase": phase, "slot": name, "rc": p.poll(), "error": "not ready",
                             "log": tail(f"{run}/{phase}-{name}.log")})
    return procs, ready


FAMILIES = {"gpu_process_busy_ratio": 0, "gpu_process_busy_ratio_lower": 1,
            "gpu_process_busy_ratio_upper": 2, "gpu_process_sm_utilization_ratio": 3}
LINE = re.compile(r'^(gpu_process_[a-z_]+)\{([^}]*)\} (\S+)$')


def read_once():
    body = urllib.request.urlopen(URL + "/metrics", timeout=3).read().decode()
    dbg = json.loads(urllib.request.urlopen(URL + "/debug/attribution", timeout=3).read())
    procs = {}
    for line in body.splitlines():
        m = LINE.match(line)
        if not m or m.group(1) not in FAMILIES:
            continue
        pid = re.search(r'pid="(\d+)"', m.group(2))
        if pid:
            procs.setdefault(pid.group(1), [None] * 4)[FAMILIES[m.group(1)]] = float(m.group(3))
    gpus = {}
    for g in dbg.get("gpus", []):
        c = g.get("compute", {})
        # All of it: the stretch checks' inputs (lone_stretch), the stages and the bounds are
        # what the tolerances are tuned on offline (analyze.py --tune).
        gpus[str(g.get("index", len(gpus)))] = {
            "method": c.get("method"), "disputed": c.get("disputed", []),
            "device": c.get("device_activity"), "why": c.get("why") or "",
            # The stretch of unix time the figures cover (tessera publishes it from issue 42's
            # run 17 on): the truth is read over it, not over a window guessed from the read.
            "window": c.get("figure_window"), "device_window": c.get("device_window"),
            "candidates": c.get("candidates", []), "quiet": c.get("quiet", []),
            "bounds_only": c.get("bounds_only"), "lone_stretch": c.get("lone_stretch"),
            "outlasting": c.get("outlasting"), "probe_idle": c.get("probe_idle"),
            "from_timelines": c.get("from_timelines"), "stages": c.get("probe_stages"),
            # NVML's per-process figure, the probe's raw totals and the share of the window
            # it traced (a sampled figure's window is the timelines', 2 s behind), beside the
            # split's.
            "procs": {str(p.get("pid")): [p.get("sm_utilization"), p.get("probe_busy_seconds"),
                                          p.get("probe_kernels"), p.get("probe_traced_share")]
                      for p in g.get("processes", [])}}
    return {"t": round(time.time(), 2), "p": procs, "gpu": gpus}


def watch(t0, t1, reads):
    while time.time() < t0:
        time.sleep(0.01)
    while time.time() < t1:
        t = time.time()
        try:
            reads.append(read_once())
        except Exception as e:  # a read that failed is recorded, not retried
            reads.append({"t": round(t, 2), "error": f"{type(e).__name__}: {e}"})
        time.sleep(max(0.0, 1.0 - (time.time() - t)))


def run_draw(run, d, ready):
    """Wakes the draw's tenants, reads tessera over the draw, collects each tenant's truth."""
    st = time.time() + LEAD
    names = []
    for t in d["tenants"]:
        for name in ([t["slot"], t["slot"] + "r1"] if t["kind"] == "ddp" else [t["slot"]]):
            if name not in ready:
                t.setdefault("error", "tenant not ready")
                continue
            c = {"draw": d["draw"], "start": st, "dur": DUR, "duty": t["duty"], "arrival": t["arrival"],
                 "seed": t["seed"], "rate_by": d.get("rate_by", "event")}
            with open(f"{run}/ctl/{name}.tmp", "w") as f:
                json.dump(c, f)
            os.replace(f"{run}/ctl/{name}.tmp", f"{run}/ctl/{name}.json")
            names.append(name)
    reads = []
    watch(st + SKIP, st + DUR - 1, reads)
    wait_until = st + DUR + 20
    while time.time() < wait_until and not all(os.path.exists(f"{run}/res/{n}-{d['draw']}.json") for n in names):
        time.sleep(0.2)
    results = {}
    for n in names:
        try:
            results[n] = json.load(open(f"{run}/res/{n}-{d['draw']}.json"))
        except (OSError, ValueError):
            results[n] = {"slot": n, "error": "no result (crashed or late)"}
    for t in d["tenants"]:
        r = results.get(t["slot"])
        if t["slot"] in ready and "pid" in ready[t["slot"]]:
            # Without its result a tenant's reads still count where no truth is needed (was a
            # liar's split disputed?): run 4's over-claiming liar never wrote its result.
            t["pid"] = ready[t["slot"]]["pid"]
        if r:
            t.update({k: r[k] for k in ("pid", "truth", "truth_event", "served", "late_s", "error", "reqs") if k in r})
            if r1 := results.get(t["slot"] + "r1"):
                t["rank1"] = {k: r1.get(k) for k in ("pid", "truth", "error", "reqs")}
    return {**d, "start": st, "dur": DUR, "skip": SKIP, "reads": reads}


def run_phase(run, phase, pool, draws, args, deadline, out, failures, two_gpus):
    # A pool's graph tenants compile again (from the calibration's warm cache: seconds, not
    # minutes); the rest are ready in ~15 s.
    procs, ready = start_pool(run, phase, pool, args.probe, min(deadline, time.time() + 200), failures, two_gpus)
    log(phase, "pool ready:", sorted(ready))
    done = 0
    for d in draws:
        if time.time() + LEAD + DUR + 8 > deadline:
            break
        log("draw", d["draw"], [(t["slot"], t["duty"]) for t in d["tenants"]])
        rec = run_draw(run, d, ready)
        out.write(json.dumps({"type": "draw", **rec}) + "\n")
        out.flush()
        done += 1
    for name in procs:
        with open(f"{run}/ctl/{name}.json", "w") as f:
            json.dump({"quit": True}, f)
    time.sleep(1.0)
    for p in procs.values():
        stop(p, 3.0)
    for name in procs:
        shutil.copy(f"{run}/{phase}-{name}.log", f"{run}/logs/") if os.path.exists(f"{run}/{phase}-{name}.log") else None
    return done


def clock_sampler(gpu, path):
    """SM clock, power and utilization twice a second (read-only nvidia-smi): the truth is
    calibrated at one clock and served at another (issue 42, "check the truth")."""
    args = ["nvidia-smi", "--query-gpu=timestamp,index,clocks.sm,power.draw,utilization.gpu",
            "--format=csv,noheader,nounits", "-lms", "500"]
    if gpu is not None:
        args += ["-i", str(gpu)]
    try:
        return start(args, None, path)
    except OSError:
        return None


def read_clocks(path):
    """[unix time, GPU index, SM MHz, W, util %] from the clock log (nvidia-smi stamps local time, UTC on
    the GPU machines), for analyze.py's clock-corrected truth."""
    import datetime
    rows = []
    try:
        with open(path) as f:
            for line in f:
                p = [x.strip() for x in line.split(",")]
                try:
                    t = datetime.datetime.strptime(p[0], "%Y/%m/%d %H:%M:%S.%f").replace(
                        tzinfo=datetime.timezone.utc).timestamp()
                    rows.append([round(t, 2), int(p[1]), float(p[2]), float(p[3]), float(p[4])])
                except (ValueError, IndexError):
                    continue
    except OSError:
        pass
    return rows


def alone_plan(kinds, dur):
    """Each kind alone at 0.3 of the device in kernel time, records on (issue 42's truth check)."""
    return [{"draw": f"alone-{k}", "mode": "alone", "class": "alone", "rate_by": "kernel",
             "tenants": [{"slot": f"{k}-0", "kind": k, "liar": None, "duty": 0.3, "arrival": "periodic",
                          "seed": 1000 + n}]} for n, k in enumerate(kinds)]


def main():
    global DUR, SKIP, PORT, URL, RUN, RECORD_LOG
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--out", required=True)
    p.add_argument("--budget", type=float, default=520, help="seconds for everything")
    p.add_argument("--seed", type=int, required=True, help="fixed before the run, written in the data")
    p.add_argument("--tessera", required=True)
    p.add_argument("--probe", required=True)
    p.add_argument("--commit", default="unknown")
    p.add_argument("--mps-share", type=float, default=0.35, help="share of the draw time for MPS")
    p.add_argument("--dur", type=float, default=DUR, help="seconds a draw runs")
    p.add_argument("--skip", type=float, default=SKIP, help="reads begin this long into a draw")
    p.add_argument("--gpu", type=int, help="run on this GPU only (its tenants, MPS daemon, port and "
                   "folders its own), so that one host runs several corpora side by side")
    p.add_argument("--classes", default="light", help="light, heavy, long (issue 54's long kernels), comma-separated")
    p.add_argument("--modes", default="ts,mps", help="ts, mps or both")
    p.add_argument("--heavy-share", type=float, default=0.5, help="share of the draws that are heavy")
    p.add_argument("--alone", action="store_true", help="first, each heavy kind alone with records on")
    p.add_argument("--record-log", action="store_true", help="every pool tenant's kernel records "
                   "(TESSERA_PROBE_RECORD_LOG) into logs, for replays")
    args = p.parse_args()
    DUR, SKIP, RECORD_LOG = args.dur, args.skip, args.record_log
    classes, modes = set(args.classes.split(",")), set(args.modes.split(","))
    if args.gpu is not None:
        os.environ["CUDA_VISIBLE_DEVICES"] = str(args.gpu)
        PORT = 9950 + args.gpu
        URL = f"http://127.0.0.1:{PORT}"
        RUN = f"/tmp/corpus-run-g{args.gpu}"
    t_start = time.time()
    end = t_start + args.budget
    run = RUN
    shutil.rmtree(run, ignore_errors=True)
    os.makedirs(f"{run}/logs")
    os.makedirs(args.out, exist_ok=True)
    n_gpus = gpus() if args.gpu is None else 1
    ts_pool, mps_pool, ts_draws, mps_draws = [], [], [], []
    if "light" in classes:
        ts_pool, mps_pool = list(TS_POOL), list(MPS_POOL)
        ts_draws, mps_draws = plan(args.seed, 20, "ts", TS_POOL), plan(args.seed, 10, "mps", MPS_POOL)
    if "heavy" in classes:
        hts, hmps = plan_heavy(args.seed, 20, "ts", HEAVY_TS_POOL), plan_heavy(args.seed, 10, "mps", HEAVY_MPS_POOL)
        ts_pool += [s for s in HEAVY_TS_POOL if s not in ts_pool]
        mps_pool += [s for s in HEAVY_MPS_POOL if s not in mps_pool]
        if "light" in classes:  # interleaved, heavy first, so a cut budget keeps both classes
            share = args.heavy_share
            ts_draws = interleave(hts, ts_draws, share)
            mps_draws = interleave(hmps, mps_draws, share)
        else:
            ts_draws, mps_draws = hts, hmps
    if "long" in classes:
        lts, lmps = plan_long(args.seed, "ts", LONG_TS_PAIRS), plan_long(args.seed, "mps", LONG_MPS_PAIRS)
        ts_pool += [s for s in LONG_TS_POOL if s not in ts_pool]
        mps_pool += [s for s in LONG_MPS_POOL if s not in mps_pool]
        if ts_draws or mps_draws:  # beside another class: interleaved, long first
            ts_draws = interleave(lts, ts_draws, args.heavy_share)
            mps_draws = interleave(lmps, mps_draws, args.heavy_share)
        else:
            ts_draws, mps_draws = lts, lmps
    if "ts" not in modes:
        ts_draws = []
    if "mps" not in modes:
        mps_draws = []
    kinds = sorted({k for _, k, _ in (ts_pool if ts_draws else []) + (mps_pool if mps_draws else [])})
    kinds = [k for k in kinds if k != "ddp" or n_gpus >= 2]
    alone = alone_plan([k for k in HEAVY_KINDS if k != "holder" and k in kinds], DUR) if args.alone else []
    failures = []
    out = open(f"{args.out}/corpus.jsonl", "w")
    card = quiet_run(["nvidia-smi", "--query-gpu=index,name,driver_version,compute_mode,mig.mode.current",
                      "--format=csv,noheader"])
    out.write(json.dumps({"type": "header", "seed": args.seed, "commit": args.commit, "started": t_start,
                          "budget_s": args.budget, "gpus": n_gpus, "gpu": args.gpu, "card": card, "dur": DUR,
                          "skip": SKIP, "classes": sorted(classes), "timeline_window_figures": True,
                          "plan": alone + ts_draws + mps_draws}) + "\n")
    env = dict(os.environ, TESSERA_METRICS_DETAIL="full")
    env.pop("CUDA_INJECTION64_PATH", None)
    tessera = start([args.tessera, f"--web.listen-address=127.0.0.1:{PORT}", "--sample.interval=1s",
                     "--nvml.process-interval=1s", "--kubelet.enabled=false", "--kube.enabled=false",
                     "--web.enable-debug=true", f"--probe.socket={os.environ['TESSERA_PROBE_SOCKET']}"],
                    env, f"{run}/logs/tessera.log")
    clocks = clock_sampler(args.gpu, f"{run}/logs/clocks.csv")
    if n_gpus < 2 and "light" in classes:
        failures.append({"phase": "calibration", "kind": "ddp", "error": f"{n_gpus} GPU(s) visible"})
    # Cold torch.compile of the graph decoder (~1-2 min) is the long pole of the calibration.
    calib = calibrate(run, kinds, t_start + min(330, args.budget * 0.35), failures)
    log("calibrated:", {k: [round(c["kernel_ms"], 3) for c in v["classes"]] for k, v in calib.items()})
    out.write(json.dumps({"type": "calib", "calib": calib}) + "\n")
    alone_done = 0
    if alone:
        pool_alone = [(t["slot"], t["kind"], None) for d in alone for t in d["tenants"]]
        alone_done = run_phase(run, "alone", pool_alone, alone, args, end - 60, out, failures, False)
    left = end - time.time()
    mps_from = end - max(60.0, left * args.mps_share) if ts_draws and mps_draws else end - 10
    done = run_phase(run, "ts", ts_pool, ts_draws, args, mps_from, out, failures, n_gpus >= 2) if ts_draws else 0
    mps_done = 0
    pipe = f"/tmp/corpus-mps-pipe{'' if args.gpu is None else f'-g{args.gpu}'}"
    if mps_draws and end - time.time() > 60 + DUR:
        menv = {"CUDA_MPS_PIPE_DIRECTORY": pipe, "CUDA_MPS_LOG_DIRECTORY": pipe.replace("pipe", "log")}
        for v in menv.values():
            os.makedirs(v, exist_ok=True)
        os.environ.update(menv)
        try:
            subprocess.run(["nvidia-cuda-mps-control", "-d"], check=True, timeout=20)
            if args.gpu is not None:
                # The daemon (and the server it starts) sees only this GPU; a client's
                # CUDA_VISIBLE_DEVICES counts within the server's devices (run 12's clients,
                # asking for the host's index, found "no CUDA GPUs").
                os.environ["CUDA_VISIBLE_DEVICES"] = "0"
            mps_done = run_phase(run, "mps", mps_pool, mps_draws, args, end - 10, out, failures, False)
        except (OSError, subprocess.SubprocessError) as e:
            failures.append({"phase": "mps", "error": f"MPS daemon: {e}"})
        finally:
            quiet_run(["nvidia-cuda-mps-control"], "quit\n")
    elif mps_draws:
        failures.append({"phase": "mps", "error": "no budget left"})
    stop(tessera)
    if clocks:
        stop(clocks, 1.0)
    for q in PROCS:
        stop(q, 1.0)
    out.write(json.dumps({"type": "footer", "ts_draws_run": done, "mps_draws_run": mps_done,
                          "alone_run": alone_done, "clocks": read_clocks(f"{run}/logs/clocks.csv"),
                          "planned_not_run": [d["draw"] for d in alone[alone_done:] + ts_draws[done:] + mps_draws[mps_done:]],
                          "failures": failures, "wall_s": round(time.time() - t_start, 1)}) + "\n")
    out.close()
    subprocess.run(["tar", "czf", f"{args.out}/logs.tgz", "-C", run, "logs", "calib"] +
                   [f for f in os.listdir(run) if f.endswith(".log")], check=False)
    # The record logs are packed by run.sh, after the driver: packed here, inside the driver's
    # timeout, run 17's archive was cut short.


def interleave(first, second, share):
    """Draws of two classes in one order: `share` of them from `first`, spread through."""
    out, a, b = [], list(first), list(second)
    while a or b:
        take_a = a and (not b or sum(1 for d in out if d in first) < share * (len(out) + 1))
        out.append(a.pop(0) if take_a else b.pop(0))
    return out


if __name__ == "__main__":
    main()

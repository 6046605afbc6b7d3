"""Issue 44's energy validation on one GPU (docs/energy-validation.md); run.sh runs it.

    driver.py --out DIR --tessera BIN --probe SO --fake-cluster BIN [--gpu N] [--dry]

tessera runs throughout, with the CUDA probe injected into the tenants and a fake kubelet and
API server (examples/fake_cluster.rs) that make them the pods energy/a and energy/b. Phases:

  idle          nothing runs, pod a holds the GPU: tessera learns the idle floor, and the
                floor the alone runs are measured above is read from the GPU's counter
  a-alone       tenant A alone, pod a holding the GPU alone (exclusive: 100 % must be a's)
  b-alone       tenant B alone, pods a and b holding a replica each (time-slicing): a runs
                nothing, so it pays half the floor and none of B's work
  together-ts   A and B together, time-sliced
  together-mps  A and B together under MPS (a private daemon, quit at the end)

At each measured window's edges it reads the GPU's energy counter (NVML through ctypes) and
tessera's /metrics and /debug/attribution; it writes every read to DIR/energy.jsonl and the
power trace to DIR/nvml.csv. The tenants do a fixed amount of work per 100 ms, calibrated in
their alone run, so a tenant does the same work alone and shared (tenant.py).

A process's pod is read from its cgroup: the tenants are put in the pods' cgroups where
/sys/fs/cgroup allows it, else tessera reads a procfs tree of links to their /proc entries
with the pods' cgroup files (--path.procfs), as lab/device/archive/billing_h100.sh did.

--dry runs the plumbing without a GPU: the fake NVML library (NVML_LIBRARY and tessera's
--nvml.library) on a scenario written here, whose processes are mapped to sleeping tenants.
Its figures mean nothing.
"""
import argparse
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from nvml import Nvml, Sampler  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
PORT = int(os.environ.get("ENERGY_PORT", "9953"))
URL = f"http://127.0.0.1:{PORT}"
RUN = os.environ.get("ENERGY_RUN_DIR", "/tmp/energy-run")
MPS_PIPE = "/tmp/energy-mps-pipe"
MPS_LOG = "/tmp/energy-mps-log"
# Seconds: the idle phase (the floor window is 20 s), then for each run the warm-up after the
# tenants start their work and the measured window.
IDLE, WARM, ALONE, TOGETHER = 32, 6, 40, 60
FLOOR_WINDOW = "20s"
# (size, share of each 100 ms the work fills alone)
TENANTS = {
    "a": (int(os.environ.get("A_SIZE", "8192")), float(os.environ.get("A_DUTY", "0.5"))),
    "b": (int(os.environ.get("B_SIZE", "8192")), float(os.environ.get("B_DUTY", "0.2"))),
}
# (phase, holding file, tenants, MPS, measured seconds)
PLAN = [
    ("idle", "exclusive a", [], False, IDLE),
    ("a-alone", "exclusive a", ["a"], False, ALONE),
    ("b-alone", "shared", ["b"], False, ALONE),
    ("together-ts", "shared", ["a", "b"], False, TOGETHER),
    ("together-mps", "shared", ["a", "b"], True, TOGETHER),
]
# Dry run: the fake library's processes stand for the tenants.
DRY_PIDS = {"a": 900001, "b": 900002}
DRY_SERVER = 900003


def log(*a):
    print(time.strftime("%H:%M:%S"), *a, file=sys.stderr, flush=True)


def start(args, env, logfile, **kw):
    f = open(logfile, "ab")
    p = subprocess.Popen(args, env=env, stdout=kw.pop("stdout", f), stderr=subprocess.STDOUT,
                         start_new_session=True, **kw)
    # run.sh ends what a driver cut off by its timeout left, by these pids.
    with open(f"{RUN}/pids", "a") as pids:
        pids.write(f"{p.pid}\n")
    return p


def stop(p, grace=5):
    if p is None or p.poll() is not None:
        return
    try:
        os.killpg(p.pid, signal.SIGTERM)
        p.wait(timeout=grace)
    except (ProcessLookupError, subprocess.TimeoutExpired):
        try:
            os.killpg(p.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


def get(path, timeout=3):
    return urllib.request.urlopen(URL + path, timeout=timeout).read().decode()


LINE = re.compile(r'^([a-zA-Z_:][\w:]*)(?:\{(.*)\})? (\S+)$')
LABEL = re.compile(r'(\w+)="((?:[^"\\]|\\.)*)"')


def parse(text):
    out = []
    for line in text.splitlines():
        m = LINE.match(line)
        if m:
            out.append((m.group(1), dict(LABEL.findall(m.group(2) or "")), float(m.group(3))))
    return out


def tessera_read(gpu):
    """The energy families of GPU `gpu`, and the split's own account of itself."""
    series = [s for s in parse(get("/metrics")) if s[1].get("gpu", str(gpu)) == str(gpu)]
    r = {"containers": {}, "dynamic": {}, "nobody": {}, "device_j": None, "floor_w": None,
         "methods": [], "allocations": [], "sample_t": None}
    for name, labels, v in series:
        pod = labels.get("pod", "")
        if name == "gpu_container_energy_joules_total":
            r["containers"][f'{pod}/{labels["activity"]}'] = v
        elif name == "gpu_container_dynamic_energy_joules_total":
            r["dynamic"][pod] = v
        elif name == "gpu_energy_unattributed_joules_total":
            r["nobody"][labels["reason"]] = v
        elif name == "gpu_energy_joules_total":
            r["device_j"] = v
        elif name == "gpu_power_floor_watts":
            r["floor_w"] = v
        elif name == "gpu_compute_split_info":
            r["methods"].append(labels["method"])
        elif name == "gpu_container_allocation":
            r["allocations"].append(f'{pod}:{labels.get("device_id", "")}')
        elif name == "tessera_last_sample_timestamp_seconds":
            r["sample_t"] = v
        elif name == "gpu_info":
            r["sharing_mode"] = labels.get("sharing_mode")
    try:
        dbg = json.loads(get("/debug/attribution"))
        g = next(x for x in dbg["gpus"] if x["index"] == gpu)
        e = g.get("energy", {})
        r["why"] = e.get("why")
        r["floor_source"] = e.get("floor_source")
        r["split_why"] = g.get("compute", {}).get("why")
    except Exception as exc:  # the read is still useful without the debug page
        r["why"] = f"debug page unreadable: {exc}"
    return r


class Run:
    def __init__(self, a):
        self.a = a
        self.tenants = {}
        self.cgroups = {}
        self.procfs = None
        self.real = None
        self.mps = None
        self.calibrated = {}

    # --- setup -------------------------------------------------------------------------
    def setup(self):
        a = self.a
        shutil.rmtree(RUN, ignore_errors=True)
        os.makedirs(f"{RUN}/logs")
        self.env = dict(os.environ, PYTHONUNBUFFERED="1")
        if a.dry:
            # This process's own NVML reads (nvml.py) load the fake library too.
            os.environ["TESSERA_FAKE_NVML_SCENARIO"] = f"{RUN}/scenario.yaml"
            self.env["TESSERA_FAKE_NVML_SCENARIO"] = f"{RUN}/scenario.yaml"
            self.write_dry_scenario()
        self.nvml = Nvml(a.gpu)
        self.uuid, self.model = self.nvml.uuid(), self.nvml.name()
        log(f"GPU {a.gpu}: {self.model} {self.uuid}")
        with open(f"{RUN}/holding", "w") as f:
            f.write("exclusive a\n")
        self.fc = start([a.fake_cluster, RUN, "energy-node", self.uuid, "a", "b"], self.env,
                        f"{RUN}/logs/fake_cluster.log", stdout=open(f"{RUN}/fc.txt", "w"))
        for _ in range(100):
            text = open(f"{RUN}/fc.txt").read()
            if "SOCKET" in text:
                break
            time.sleep(0.1)
        else:
            raise RuntimeError("fake_cluster did not start: see logs/fake_cluster.log")
        for line in text.splitlines():
            parts = line.split()
            if parts[0] == "CGROUP":
                self.cgroups[parts[1]] = parts[2]
        self.cgroup_mode()
        args = [a.tessera, f"--web.listen-address=127.0.0.1:{PORT}", "--sample.interval=1s",
                "--nvml.process-interval=1s", "--nvml.slow-interval=1s", "--metrics.detail=full",
                "--web.enable-debug=true", "--kube.node-name=energy-node",
                f"--kubelet.pod-resources-socket={RUN}/kubelet.sock", "--kubelet.poll-interval=1s",
                f"--probe.socket={a.probe_socket}", f"--energy.floor-window={FLOOR_WINDOW}"]
        if self.procfs:
            args.append(f"--path.procfs={self.procfs}")
        if a.dry:
            args.append(f"--nvml.library={os.environ['NVML_LIBRARY']}")
        self.tessera = start(args, dict(self.env, KUBECONFIG=f"{RUN}/kubeconfig"),
                             f"{RUN}/logs/tessera.log")
        self.t0 = time.time()
        for _ in range(300):
            try:
                if get("/readyz", 1).startswith("ready"):
                    break
            except Exception:
                pass
            time.sleep(0.1)
        else:
            raise RuntimeError("tessera did not become ready: see logs/tessera.log")
        self.sampler = Sampler(self.nvml, f"{a.out}/nvml.csv", time.time)
        self.sampler.start()

    def cgroup_mode(self):
        """Real cgroups where /sys/fs/cgroup allows, else a procfs tree of links."""
        made = []
        if not self.a.dry:
            try:
                for pod, rel in self.cgroups.items():
                    path = "/sys/fs/cgroup" + rel
                    os.makedirs(path, exist_ok=True)
                    made.append(path)
                    if not os.access(path + "/cgroup.procs", os.W_OK):
                        raise PermissionError(path + "/cgroup.procs not writable")
                self.real = {pod: "/sys/fs/cgroup" + rel for pod, rel in self.cgroups.items()}
                log("cgroups: real, under /sys/fs/cgroup")
                return
            except OSError as e:
                log(f"cgroups: cannot make them ({e}); a procfs tree instead")
                for p in reversed(made):
                    try:
                        os.rmdir(p)
                    except OSError:
                        pass
        self.real = None
        self.procfs = f"{RUN}/proc"
        os.makedirs(self.procfs, exist_ok=True)

    def link(self, shown_pid, real_pid, cgroup_line):
        """`shown_pid`'s procfs entry in the tree: `real_pid`'s files, the given cgroup."""
        d = f"{self.procfs}/{shown_pid}"
        shutil.rmtree(d, ignore_errors=True)
        os.makedirs(d)
        for f in ("stat", "comm", "status", "environ", "cmdline"):
            os.symlink(f"/proc/{real_pid}/{f}", f"{d}/{f}")
        with open(f"{d}/cgroup", "w") as f:
            f.write(cgroup_line)

    def link_mps_server(self):
        """In a procfs tree, the MPS server keeps its own (non-pod) cgroup."""
        if not self.procfs or self.a.dry:
            return
        for pid in os.listdir("/proc"):
            if not pid.isdigit() or os.path.exists(f"{self.procfs}/{pid}"):
                continue
            try:
                if open(f"/proc/{pid}/comm").read().strip() == "nvidia-cuda-mps":
                    self.link(pid, pid, open(f"/proc/{pid}/cgroup").read())
            except OSError:
                pass

    def write_dry_scenario(self):
        """One H100 whose phases follow the plan's clock: its processes are the tenants."""
        ph = [{"at_ms": 0, "name": "idle", "gpus": [{"gpu": 0, "utilization": 0, "power_watts": 75}],
               "processes": []}]
        t = 2 + IDLE + 4  # tessera's start, the idle phase, the switch
        watts = {"a-alone": (50, 390, ["a"]), "b-alone": (20, 200, ["b"]),
                 "together-ts": (70, 500, ["a", "b"]), "together-mps": (70, 470, ["a", "b"])}
        self.dry_go = {}
        for name, _, tenants, mps, measure in PLAN[1:]:
            util, w, who = watts[name]
            self.dry_go[name] = t
            procs = [{"pid": DRY_PIDS[x], "gpu": 0, "comm": "python3", "memory_mib": 2000,
                      "sm_util": int(round(TENANTS[x][1] * 100)), **({"kind": "mps_client"} if mps else {})}
                     for x in who]
            if mps:
                procs.append({"pid": DRY_SERVER, "gpu": 0, "comm": "nvidia-cuda-mps-server",
                              "kind": "mps_server", "memory_mib": 66})
            ph.append({"at_ms": int(t * 1000), "name": name,
                       "gpus": [{"gpu": 0, "utilization": util, "power_watts": w}], "processes": procs})
            t += WARM + measure + 3
            ph.append({"at_ms": int(t * 1000), "name": name + " ends",
                       "gpus": [{"gpu": 0, "utilization": 0, "power_watts": 80}], "processes": []})
            t += 5
        scenario = {"gpus": [{"sku": "h100-80gb-hbm3"}], "phases": ph}
        with open(f"{RUN}/scenario.yaml", "w") as f:
            json.dump(scenario, f, indent=1)  # JSON is YAML

    # --- phases ------------------------------------------------------------------------
    def hold(self, holding):
        with open(f"{RUN}/holding", "w") as f:
            f.write(holding + "\n")
        want = ["a"] if holding.startswith("exclusive") else ["a", "b"]
        for _ in range(100):
            r = tessera_read(self.a.gpu)
            pods = sorted({x.split(":")[0] for x in r["allocations"]})
            if pods == want and (holding == "shared") == any("::" in x for x in r["allocations"]):
                return
            time.sleep(0.2)
        log(f"tessera did not see holding {holding!r} in 20 s")

    def start_mps(self):
        for d in (MPS_PIPE, MPS_LOG):
            shutil.rmtree(d, ignore_errors=True)
            os.makedirs(d)
        env = dict(self.env, CUDA_MPS_PIPE_DIRECTORY=MPS_PIPE, CUDA_MPS_LOG_DIRECTORY=MPS_LOG,
                   CUDA_VISIBLE_DEVICES=self.uuid)
        if self.a.dry:
            return
        rc = subprocess.run(["nvidia-cuda-mps-control", "-d"], env=env).returncode
        log(f"MPS control daemon started (exit {rc})")
        self.mps = env

    def quit_mps(self):
        if self.mps is None:
            return
        subprocess.run(["nvidia-cuda-mps-control"], input=b"quit\n", env=self.mps)
        self.mps = None
        log("MPS quit")

    def start_tenant(self, name, phase, mps, seconds):
        size, duty = TENANTS[name]
        files = {k: f"{RUN}/{phase}-{name}.{k}" for k in ("ready", "report")}
        go = f"{RUN}/{phase}.go"
        cmd = [sys.executable, f"{HERE}/tenant.py", "--size", str(size), "--duty", str(duty),
               "--seconds", str(seconds), "--ready", files["ready"], "--go", go,
               "--report", files["report"]]
        if name in self.calibrated:
            cmd += ["--per-period", str(self.calibrated[name])]
        if self.a.dry:
            cmd.append("--dry")
        env = dict(self.env, CUDA_VISIBLE_DEVICES=self.uuid,
                   CUDA_INJECTION64_PATH=self.a.probe, TESSERA_PROBE_SOCKET=self.a.probe_socket)
        if mps:
            env.update(CUDA_MPS_PIPE_DIRECTORY=MPS_PIPE, CUDA_MPS_LOG_DIRECTORY=MPS_LOG)
        logfile = f"{RUN}/logs/{phase}-{name}.log"
        if self.real:
            procs = self.real[name] + "/cgroup.procs"
            p = start(["sh", "-c", f'echo $$ > {procs} && exec "$@"', "tenant"] + cmd, env, logfile)
        else:
            p = start(cmd, env, logfile)
            line = f"0::{self.cgroups[name]}\n"
            self.link(DRY_PIDS[name] if self.a.dry else p.pid, p.pid, line)
        self.tenants[name] = (p, files)

    def read(self):
        t = time.time()
        e = self.nvml.energy_joules()
        return {"t": t, "nvml_j": e, "tessera": tessera_read(self.a.gpu)}

    def phase(self, name, holding, tenants, mps, measure, out):
        log(f"phase {name}: holding {holding}, tenants {tenants}, mps {mps}")
        self.hold(holding)
        if mps:
            self.start_mps()
        run_for = WARM + measure + 3
        for x in tenants:
            self.start_tenant(x, name, mps, run_for)
        deadline = time.time() + 120
        ready = {}
        while len(ready) < len(tenants) and time.time() < deadline:
            self.link_mps_server()
            for x in tenants:
                p, files = self.tenants[x]
                if x not in ready and os.path.exists(files["ready"]):
                    ready[x] = json.load(open(files["ready"]))
                if p.poll() is not None and x not in ready:
                    raise RuntimeError(f"tenant {x} exited ({p.returncode}) before it was ready")
            time.sleep(0.1)
        if len(ready) < len(tenants):
            raise RuntimeError(f"tenants not ready in 120 s: {sorted(ready)}")
        for x, r in ready.items():
            self.calibrated.setdefault(x, r["per_period"])
        if self.a.dry and name in self.dry_go:
            time.sleep(max(0.0, self.t0 + self.dry_go[name] - time.time()))
        open(f"{RUN}/{name}.go", "w").close()
        go = time.time()
        time.sleep(WARM if tenants else 8)
        self.link_mps_server()
        first = self.read()
        time.sleep(measure - (0 if tenants else 8))
        last = self.read()
        reports = {}
        for x in tenants:
            p, files = self.tenants.pop(x)
            try:
                p.wait(timeout=30)
            except subprocess.TimeoutExpired:
                stop(p)
            try:
                reports[x] = json.load(open(files["report"]))
            except (OSError, ValueError):
                reports[x] = None
        if mps:
            self.quit_mps()
        rec = {"phase": name, "holding": holding, "tenants": tenants, "mps": mps, "go": go,
               "ready": ready, "start": first, "end": last, "reports": reports}
        out.write(json.dumps(rec) + "\n")
        out.flush()
        log(f"phase {name}: {last['nvml_j'] - first['nvml_j']:.0f} J over "
            f"{last['t'] - first['t']:.1f} s; tessera {last['tessera'].get('why')}")

    def teardown(self):
        for p, _ in list(self.tenants.values()):
            stop(p)
        self.quit_mps()
        stop(getattr(self, "tessera", None))
        stop(getattr(self, "fc", None))
        if getattr(self, "sampler", None):
            self.sampler.stop()
        for path in (self.real or {}).values():
            try:
                os.rmdir(path)
            except OSError as e:
                log(f"cgroup {path} left: {e}")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--tessera", required=True)
    ap.add_argument("--probe", required=True)
    ap.add_argument("--probe-socket", default="/tmp/energy-probe.sock")
    ap.add_argument("--fake-cluster", required=True)
    ap.add_argument("--gpu", type=int, default=int(os.environ.get("GPU", "0")))
    ap.add_argument("--commit", default="unknown")
    ap.add_argument("--dry", action="store_true")
    a = ap.parse_args()
    os.makedirs(a.out, exist_ok=True)
    run = Run(a)
    failures = []
    with open(f"{a.out}/energy.jsonl", "w") as out:
        try:
            run.setup()
            out.write(json.dumps({"header": True, "commit": a.commit, "gpu": a.gpu, "uuid": run.uuid,
                                  "model": run.model, "tenants": TENANTS, "dry": a.dry,
                                  "plan": PLAN, "warm": WARM, "floor_window": FLOOR_WINDOW,
                                  "cgroups": "real" if run.real else "procfs"}) + "\n")
            for name, holding, tenants, mps, measure in PLAN:
                try:
                    run.phase(name, holding, tenants, mps, measure, out)
                except Exception as e:  # one failed phase must not cost the others
                    failures.append(f"{name}: {e}")
                    log(f"phase {name} failed: {e}")
                    for p, _ in list(run.tenants.values()):
                        stop(p)
                    run.tenants.clear()
                    run.quit_mps()
        except Exception as e:
            failures.append(f"setup: {e}")
            log(f"setup failed: {e}")
        finally:
            run.teardown()
            out.write(json.dumps({"footer": True, "failures": failures}) + "\n")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())

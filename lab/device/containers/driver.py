"""The CUDA probe in containers on a GPU host: real PyTorch tenants, each in its own
PID, mount and cgroup namespaces inside a kubepods-style cgroup v2 path, with the probe
injected the way the chart's admission policy injects it; tessera as the chart runs it, with
its socket in /run/tessera and the library installed by `tessera install-probe` into
/opt/tessera/lib; a fake kubelet and API server (examples/fake_cluster.rs) naming the tenants
pods energy/ts-a, energy/ts-b, energy/mps-a and energy/mps-b, each holding a replica.

    driver.py --out DIR --tessera BIN --probe SO --fake-cluster BIN [--gpu N] [--dry]

Phases, one after the other in one run: ts-a (50 % duty) and ts-b (20 %) time-sliced, then
mps-a and mps-b under a private MPS daemon. Each tenant does a fixed amount of bf16 matmul
work per 100 ms and logs its progress; the truth is that work's kernel time alone (calib.py:
CUPTI kernel records under PyTorch's profiler, in a process without the probe). tessera's
/metrics is read every second; DIR/reads.jsonl gets every read, DIR/phases.jsonl what each
phase set up and saw (PIDs in and out of the namespaces, cgroups, the socket's mode).

Where the host refuses a namespace or cgroup v2 writes, the driver falls back (a plain process;
a procfs tree of links with the pods' cgroup lines, as lab/device/energy does) and says so in
phases.jsonl. `--dry` runs the plumbing here without a GPU: the fake NVML with processes named
by pid files, tenants that load the probe themselves against the stand-in CUPTI.
"""
import argparse
import importlib.util
import json
import os
import re
import shutil
import signal
import stat
import subprocess
import sys
import time
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "energy"))
from nvml import Nvml  # noqa: E402

PORT = int(os.environ.get("CTR_PORT", "9954"))
URL = f"http://127.0.0.1:{PORT}"
RUN = os.environ.get("CTR_RUN_DIR", "/tmp/ctr-run")
RECORD_LOG = os.environ.get("CTR_RECORD_LOG", "1") != "0"
SOCK_DIR = "/run/tessera"
LIB_DIR = "/opt/tessera/lib"
MPS_PIPE = "/tmp/ctr-mps-pipe"
MPS_LOG = "/tmp/ctr-mps-log"
WARM, MEASURE = int(os.environ.get("CTR_WARM", "12")), int(os.environ.get("CTR_MEASURE", "40"))
SIZE = int(os.environ.get("CTR_SIZE", "8192"))
# What the two tenants of a phase ask together (0.5 + 0.2 of a matmul stream alone; with the
# work per period fixed from the calibration they realize it in every phase): calibration at
# these duties runs near the clock the phases run at. At 0.35 and 0.45 it ran 20-50 MHz below
# the time-sliced and MPS phases and 3 % off is no longer the phase's clock.
CALIB_DUTIES = os.environ.get("CTR_CALIB_DUTIES", "0.65,0.7")
TENANTS = {"ts-a": 0.5, "ts-b": 0.2, "mps-a": 0.5, "mps-b": 0.2}
PHASES = [("time-sliced", ["ts-a", "ts-b"], False), ("mps", ["mps-a", "mps-b"], True),
          ("mps-apart", ["mps-c", "mps-d"], True)]
PHASES = [p for p in PHASES if p[0] in os.environ.get("CTR_PHASES", "time-sliced,mps").split(",")]
# The pairs above start their 100-ms periods at the same instant, so the smaller tenant's kernels
# always run beside the larger one's: under MPS it never runs a kernel alone. `mps-apart` (only
# when CTR_PHASES names it) is the same MPS pair with the smaller tenant half a period later.
if any(p[0] == "mps-apart" for p in PHASES):
    TENANTS.update({"mps-c": 0.5, "mps-d": 0.2})
OFFSETS = {"mps-d": 0.05}
# The dry run runs one tenant as another user (nobody), as a pod of another UID: it reaches the
# socket only through its mode. On the GPU host every tenant is root, as CUDA images run.
DRY_UID = {"ts-b": 65534}
# And one tenant with a worker process of its own (a spawned data loader): its probe connects
# by itself, under its own PID, and belongs to the same pod.
DRY_WORKER = {"ts-a"}
# And a process in a container that holds no GPU (NVML lists it nowhere) whose probe writes to
# the socket anyway: nothing it sends may appear.
STRAY = "stray"
UNSHARE = {"pid+mount+cgroup": ["unshare", "--pid", "--fork", "--mount", "--cgroup", "--propagation", "private", "--"],
           # The fallback where a tenant cannot run in a PID namespace of its own (MPS may need
           # its clients in the server's): the host's PIDs, the rest as a container.
           "mount+cgroup": ["unshare", "--mount", "--cgroup", "--propagation", "private", "--"]}
READY_S = 90


def log(*a):
    print(time.strftime("%H:%M:%S"), *a, file=sys.stderr, flush=True)


def start(args, env, logfile, **kw):
    f = open(logfile, "ab")
    p = subprocess.Popen(args, env=env, stdout=kw.pop("stdout", f), stderr=subprocess.STDOUT,
                         start_new_session=True, **kw)
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
            p.wait(timeout=grace)
        except (ProcessLookupError, subprocess.TimeoutExpired):
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


WANT = ("gpu_container_busy_ratio", "gpu_container_busy_ratio_lower", "gpu_container_busy_ratio_upper",
        "gpu_container_busy_seconds_total", "gpu_process_busy_ratio", "gpu_compute_split_info",
        "gpu_utilization_ratio", "tessera_last_sample_timestamp_seconds", "gpu_info",
        "gpu_container_allocation", "gpu_process_kernels_total", "gpu_process_memory_used_bytes",
        "gpu_process_busy_ratio_lower", "gpu_process_busy_ratio_upper")


def tessera_read():
    rows = []
    for name, labels, v in parse(get("/metrics")):
        if name in WANT or name.startswith("tessera_probe"):
            rows.append([name, labels, v])
    return rows


def children(pid):
    try:
        return [int(c) for c in open(f"/proc/{pid}/task/{pid}/children").read().split()]
    except OSError:
        pass
    kids = []
    for d in os.listdir("/proc"):
        try:
            if d.isdigit() and int(open(f"/proc/{d}/stat").read().rsplit(")", 1)[1].split()[1]) == pid:
                kids.append(int(d))
        except (OSError, ValueError, IndexError):
            pass
    return kids


class Run:
    def __init__(self, a):
        self.a = a
        self.made_dirs = []
        self.real = None
        self.procfs = None
        self.mps = None
        self.tenants = {}
        self.ns = "none"
        self.facts = {}

    def setup(self):
        a = self.a
        shutil.rmtree(RUN, ignore_errors=True)
        os.makedirs(f"{RUN}/logs")
        if a.dry:
            # The other user's tenant writes its files here and runs copies it can read.
            os.chmod(RUN, 0o1777)
            os.makedirs(f"{RUN}/bin")
            for f in (f"{HERE}/tenant.py", os.environ["TESSERA_PROBE_CUPTI"]):
                shutil.copy2(f, f"{RUN}/bin/")
                os.chmod(f"{RUN}/bin/{os.path.basename(f)}", 0o755)
            os.chmod(f"{RUN}/bin", 0o755)
        self.env = {k: v for k, v in os.environ.items()
                    if not k.startswith(("CUDA_INJECTION64", "TESSERA_PROBE_SOCKET"))}
        self.env["PYTHONUNBUFFERED"] = "1"
        if a.dry:
            os.environ["TESSERA_FAKE_NVML_SCENARIO"] = f"{RUN}/scenario.yaml"
            self.env["TESSERA_FAKE_NVML_SCENARIO"] = f"{RUN}/scenario.yaml"
            self.write_dry_scenario()
        self.nvml = Nvml(a.gpu)
        self.uuid = self.nvml.uuid()
        log(f"GPU {a.gpu}: {self.nvml.name()} {self.uuid}")
        # The node's paths the chart uses (hostPath): made where missing, removed at the end.
        for d in (SOCK_DIR, LIB_DIR):
            path = ""
            for part in d.strip("/").split("/"):
                path += "/" + part
                if not os.path.isdir(path):
                    os.mkdir(path)
                    self.made_dirs.append(path)
        # The image's layout: the probe beside the binary, copied out by install-probe as the
        # DaemonSet's init container does.
        img = f"{RUN}/image/opt/tessera"
        os.makedirs(img)
        shutil.copy2(a.tessera, f"{img}/tessera")
        shutil.copy2(a.probe, f"{img}/libtessera_probe.so")
        r = subprocess.run([f"{img}/tessera", "install-probe", LIB_DIR], capture_output=True, text=True)
        self.facts["install_probe"] = {"rc": r.returncode, "out": (r.stdout + r.stderr).strip()[-300:]}
        log(f"install-probe: {self.facts['install_probe']}")
        # The namespaces a container runtime would make.
        self.ns = "none"
        for mode in UNSHARE:
            r = subprocess.run(UNSHARE[mode] + ["true"], capture_output=True, text=True)
            if r.returncode == 0:
                self.ns = mode
                break
            self.facts[f"unshare {mode}"] = r.stderr.strip()[:200]
        self.facts["namespaces"] = self.ns
        log(f"namespaces: {self.facts['namespaces']}")
        with open(f"{RUN}/holding", "w") as f:
            f.write("shared\n")
        self.fc = start([a.fake_cluster, RUN, "ctr-node", self.uuid] + list(TENANTS), self.env,
                        f"{RUN}/logs/fake_cluster.log", stdout=open(f"{RUN}/fc.txt", "w"))
        for _ in range(100):
            text = open(f"{RUN}/fc.txt").read()
            if "SOCKET" in text:
                break
            time.sleep(0.1)
        else:
            raise RuntimeError("fake_cluster did not start: see logs/fake_cluster.log")
        self.cgroups = {p[1]: p[2] for p in (l.split() for l in text.splitlines()) if p[0] == "CGROUP"}
        self.cgroup_mode()
        args = [f"{img}/tessera", f"--web.listen-address=127.0.0.1:{PORT}", "--sample.interval=1s",
                "--nvml.process-interval=1s", "--metrics.detail=full", "--web.enable-debug=true",
                "--kube.node-name=ctr-node", f"--kubelet.pod-resources-socket={RUN}/kubelet.sock",
                "--kubelet.poll-interval=1s", f"--probe.socket={SOCK_DIR}/probe.sock"]
        if self.procfs:
            args.append(f"--path.procfs={self.procfs}")
        if a.dry:
            args.append(f"--nvml.library={os.environ['NVML_LIBRARY']}")
        self.tessera = start(args, dict(self.env, KUBECONFIG=f"{RUN}/kubeconfig"), f"{RUN}/logs/tessera.log")
        for _ in range(300):
            try:
                if get("/readyz", 1).startswith("ready"):
                    break
            except Exception:
                pass
            time.sleep(0.1)
        else:
            raise RuntimeError("tessera did not become ready: see logs/tessera.log")
        if os.environ.get("CTR_PLANT") == "socket-0600":
            # A planted fault: the socket as a chart that locked it to its owner would leave it.
            os.chmod(f"{SOCK_DIR}/probe.sock", 0o600)
        st = os.stat(f"{SOCK_DIR}/probe.sock")
        self.facts["socket"] = {"mode": oct(stat.S_IMODE(st.st_mode)), "uid": st.st_uid, "gid": st.st_gid}
        log(f"socket: {self.facts['socket']}")

    def cgroup_mode(self):
        made = []
        v2 = subprocess.run(["stat", "-fc", "%T", "/sys/fs/cgroup"], capture_output=True,
                            text=True).stdout.strip() == "cgroup2fs"
        if not self.a.dry and v2:
            try:
                for pod, rel in self.cgroups.items():
                    path = "/sys/fs/cgroup"
                    for part in rel.strip("/").split("/"):
                        path += "/" + part
                        if not os.path.isdir(path):
                            os.mkdir(path)
                            made.append(path)
                    if not os.access(path + "/cgroup.procs", os.W_OK):
                        raise PermissionError(path + "/cgroup.procs not writable")
                    # Delegation may refuse the move itself: a short-lived shell tries it.
                    r = subprocess.run(["sh", "-c", f"echo $$ > {path}/cgroup.procs"],
                                       capture_output=True, text=True)
                    if r.returncode != 0:
                        raise PermissionError(f"moving a process into {path}: {r.stderr.strip()}")
                self.real = {pod: "/sys/fs/cgroup" + rel for pod, rel in self.cgroups.items()}
                self.made_cgroups = made
                self.facts["cgroups"] = "real, cgroup v2 under /sys/fs/cgroup (kubepods.slice paths)"
                log("cgroups: " + self.facts["cgroups"])
                return
            except OSError as e:
                self.facts["cgroups"] = f"procfs tree (cannot make cgroups: {e})"
                for p in reversed(made):
                    try:
                        os.rmdir(p)
                    except OSError:
                        pass
        elif not self.a.dry:
            self.facts["cgroups"] = "procfs tree (/sys/fs/cgroup is not cgroup v2)"
        else:
            self.facts["cgroups"] = "procfs tree (dry run)"
        log("cgroups: " + self.facts["cgroups"])
        self.procfs = f"{RUN}/proc"
        os.makedirs(self.procfs, exist_ok=True)

    def link(self, pid, cgroup_line):
        d = f"{self.procfs}/{pid}"
        shutil.rmtree(d, ignore_errors=True)
        os.makedirs(d)
        for f in ("stat", "comm", "status", "environ", "cmdline"):
            os.symlink(f"/proc/{pid}/{f}", f"{d}/{f}")
        with open(f"{d}/cgroup", "w") as f:
            f.write(cgroup_line)

    def link_mps_server(self):
        if not self.procfs or self.a.dry:
            return
        for pid in os.listdir("/proc"):
            if not pid.isdigit() or os.path.exists(f"{self.procfs}/{pid}"):
                continue
            try:
                if open(f"/proc/{pid}/comm").read().strip() == "nvidia-cuda-mps":
                    self.link(pid, open(f"/proc/{pid}/cgroup").read())
            except OSError:
                pass

    def write_dry_scenario(self):
        procs = [{"pid_file": f"{RUN}/{n}.pid", "gpu": 0, "comm": "python3", "memory_mib": 2000,
                  "sm_util": int(TENANTS[n] * 100)} for n in TENANTS]
        procs += [{"pid_file": f"{RUN}/{n}-worker.pid", "gpu": 0, "comm": "python3", "memory_mib": 100,
                   "sm_util": 0} for n in DRY_WORKER]
        if os.environ.get("CTR_PLANT") == "stray-listed":
            # A planted fault: NVML lists the stray, so its reports would count.
            procs.append({"pid_file": f"{RUN}/{STRAY}.pid", "gpu": 0, "comm": "python3", "memory_mib": 100,
                          "sm_util": 0})
        scenario = {"gpus": [{"sku": "h100-80gb-hbm3"}],
                    "phases": [{"at_ms": 0, "name": "on", "gpus": [{"gpu": 0, "utilization": 70, "power_watts": 300}],
                                "processes": procs}]}
        with open(f"{RUN}/scenario.yaml", "w") as f:
            json.dump(scenario, f, indent=1)

    def calibrate(self):
        if self.a.dry:
            self.calib = {"kernel_ms": 2.0, "event_ms": 2.0, "dry": True}
            return
        out = f"{RUN}/calib.json"
        r = subprocess.run([sys.executable, f"{HERE}/calib.py", "--size", str(SIZE), "--out", out,
                            "--duties", CALIB_DUTIES],
                           env=dict(self.env, CUDA_VISIBLE_DEVICES=self.uuid), capture_output=True,
                           text=True, timeout=180)
        if r.returncode != 0:
            raise RuntimeError(f"calib.py failed: {r.stderr[-500:]}")
        self.calib = json.load(open(out))
        log(f"calibration: {self.calib}")

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

    def start_tenant(self, name, phase, mps, seconds, namespaces):
        files = {k: f"{RUN}/{phase}-{name}.{k}" for k in ("ready", "progress")}
        uid = DRY_UID.get(name) if self.a.dry else None
        py, script = (sys.executable, f"{HERE}/tenant.py") if uid is None else ("/usr/bin/python3", f"{RUN}/bin/tenant.py")
        # The work per period from the calibration's matmul alone, the same in every phase: a
        # tenant timing its own matmul beside an MPS client warming up read it up to twice as
        # long and asked half the work, which is not the load the phase stands for.
        duty = TENANTS.get(name, 0.1)
        per_period = max(1, round(duty * 100.0 / self.calib["kernel_ms"]))
        cmd = [py, script, "--size", str(SIZE), "--duty", str(duty), "--per-period", str(per_period),
               "--seconds", str(seconds), "--ready", files["ready"], "--go", f"{RUN}/{phase}.go",
               "--progress", files["progress"], "--offset", str(OFFSETS.get(name, 0.0))]
        if self.a.dry:
            cmd.append("--dry")
            if name in DRY_WORKER:
                cmd.append("--worker")
        env = dict(self.env, CUDA_VISIBLE_DEVICES=self.uuid)
        if uid is not None:
            env["ENTER_UID"] = str(uid)
            env["TESSERA_PROBE_CUPTI"] = f"{RUN}/bin/{os.path.basename(env['TESSERA_PROBE_CUPTI'])}"
        if mps:
            env.update(CUDA_MPS_PIPE_DIRECTORY=MPS_PIPE, CUDA_MPS_LOG_DIRECTORY=MPS_LOG)
        if RECORD_LOG and not self.a.dry:
            # Every kernel record, for an offline replay of the split (lab/device/corpus/replay.py):
            # the tenants share the host's /tmp, so the log is written where the host reads it.
            os.makedirs(f"{RUN}/rec", exist_ok=True)
            env["TESSERA_PROBE_RECORD_LOG"] = f"{RUN}/rec/{phase}-{name}"
            env.setdefault("TESSERA_PROBE_RECORD_LOG_MB", "48")
        if namespaces != "none":
            cmd = UNSHARE[namespaces] + ["sh", f"{HERE}/enter.sh", SOCK_DIR, LIB_DIR] + cmd
        else:
            # No namespaces: the policy's environment on a plain process.
            env["CUDA_INJECTION64_PATH"] = f"{LIB_DIR}/libtessera_probe.so"
        logfile = f"{RUN}/logs/{phase}-{name}.log"
        if self.real:
            cmd = ["sh", "-c", f'echo $$ > {self.real[name]}/cgroup.procs && exec "$@"', "tenant"] + cmd
        p = start(cmd, env, logfile)
        self.tenants[name] = {"p": p, "files": files, "host_pid": None, "worker_host_pid": None}

    def host_pid(self, name, namespaces):
        """The tenant's PID as the host (NVML, tessera) sees it: under `unshare --fork` the
        child of the unshare process, which execs the tenant."""
        t = self.tenants[name]
        if t["host_pid"]:
            return t["host_pid"]
        pid = t["p"].pid
        if namespaces == "pid+mount+cgroup":
            kids = children(pid)
            if not kids:
                return None
            pid = kids[0]
        t["host_pid"] = pid
        if self.procfs and name in self.cgroups:
            self.link(pid, f"0::{self.cgroups[name]}\n")
        if self.a.dry:
            with open(f"{RUN}/{name}.pid", "w") as f:
                f.write(f"{pid}\n")
        return pid

    def phase(self, name, tenants, mps, reads, phases, namespaces):
        log(f"phase {name}: {tenants}, mps {mps}, namespaces {namespaces}")
        if mps:
            self.start_mps()
        run_for = WARM + MEASURE + 6
        if self.a.dry and name == PHASES[0][0]:
            tenants = tenants + [STRAY]
        for x in tenants:
            self.start_tenant(x, name, mps, run_for, namespaces)
        deadline = time.time() + READY_S
        ready = {}
        while len(ready) < len(tenants) and time.time() < deadline:
            self.link_mps_server()
            for x in tenants:
                t = self.tenants[x]
                self.host_pid(x, namespaces)
                if x not in ready and os.path.exists(t["files"]["ready"]):
                    ready[x] = json.load(open(t["files"]["ready"]))
                    if ready[x].get("worker_pid") and t["host_pid"]:
                        kids = children(t["host_pid"])
                        t["worker_host_pid"] = kids[0] if kids else None
                        if kids and self.procfs:
                            # A real cgroup would hold the worker as it holds its parent.
                            self.link(kids[0], f"0::{self.cgroups[x]}\n")
                        with open(f"{RUN}/{x}-worker.pid", "w") as f:
                            f.write(f"{kids[0] if kids else 0}\n")
                if t["p"].poll() is not None and x not in ready:
                    raise RuntimeError(f"tenant {x} exited ({t['p'].returncode}) before it was ready: "
                                       f"see logs/{name}-{x}.log")
            time.sleep(0.1)
        if len(ready) < len(tenants):
            raise RuntimeError(f"tenants not ready in {READY_S} s: {sorted(ready)}")
        open(f"{RUN}/{name}.go", "w").close()
        go = time.time()
        time.sleep(WARM)
        self.link_mps_server()
        t_end = time.time() + MEASURE
        n = 0
        while time.time() < t_end:
            t = time.time()
            try:
                rows = tessera_read()
            except Exception as e:
                rows = [["error", {}, str(e)]]
            reads.write(json.dumps({"phase": name, "t": t, "rows": rows}) + "\n")
            n += 1
            time.sleep(max(0.0, t + 1.0 - time.time()))
        reads.flush()
        for x in tenants:
            t = self.tenants.pop(x)
            try:
                t["p"].wait(timeout=40)
            except subprocess.TimeoutExpired:
                stop(t["p"])
            t["ready"] = ready[x]
            t["progress"] = [tuple(map(float, l.split())) for l in open(t["files"]["progress"]) if l.strip()] \
                if os.path.exists(t["files"]["progress"]) else []
            if x == STRAY:
                phases.write(json.dumps({"phase": name, "stray": t["host_pid"], "ready": t["ready"]}) + "\n")
                continue
            phases.write(json.dumps({"phase": name, "pod": x, "mps": mps, "namespaces": namespaces,
                                     "host_pid": t["host_pid"], "worker_host_pid": t["worker_host_pid"],
                                     "ready": t["ready"], "go": go,
                                     "progress": t["progress"], "rc": t["p"].returncode}) + "\n")
        phases.flush()
        if mps:
            self.quit_mps()
        log(f"phase {name}: {n} reads")

    def teardown(self):
        for t in list(self.tenants.values()):
            stop(t["p"])
        self.quit_mps()
        stop(getattr(self, "tessera", None))
        stop(getattr(self, "fc", None))
        for path in reversed(getattr(self, "made_cgroups", [])):
            try:
                os.rmdir(path)
            except OSError as e:
                log(f"cgroup {path} left: {e}")
        for d in reversed(self.made_dirs):
            shutil.rmtree(d, ignore_errors=True)


def corpus_driver():
    """The corpus driver, for its SM clock sampler: the truth is calibrated at one clock and
    served at another, and both runs read the clock the same way."""
    spec = importlib.util.spec_from_file_location("corpus_driver", os.path.join(HERE, "..", "corpus", "driver.py"))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--tessera", required=True)
    ap.add_argument("--probe", required=True)
    ap.add_argument("--fake-cluster", required=True)
    ap.add_argument("--gpu", type=int, default=int(os.environ.get("GPU", "0")))
    ap.add_argument("--commit", default="unknown")
    ap.add_argument("--dry", action="store_true")
    a = ap.parse_args()
    os.makedirs(a.out, exist_ok=True)
    run = Run(a)
    failures, notes = [], []
    corpus = None if a.dry else corpus_driver()
    clocks_csv, sampler = f"{RUN}/logs/clocks.csv", None
    with open(f"{a.out}/reads.jsonl", "w") as reads, open(f"{a.out}/phases.jsonl", "w") as phases:
        try:
            run.setup()
            sampler = corpus.clock_sampler(a.gpu, clocks_csv) if corpus else None
            run.calibrate()
            phases.write(json.dumps({"header": True, "commit": a.commit, "uuid": run.uuid, "dry": a.dry,
                                     "facts": run.facts, "calib": run.calib, "tenants": TENANTS,
                                     "warm": WARM, "measure": MEASURE, "size": SIZE}) + "\n")
            for name, tenants, mps in PHASES:
                modes = [run.ns] + (["mount+cgroup"] if run.ns == "pid+mount+cgroup" else [])
                for i, mode in enumerate(modes):
                    try:
                        run.phase(name, tenants, mps, reads, phases, mode)
                        break
                    except Exception as e:  # one failed phase must not cost the other
                        (failures if i == len(modes) - 1 else notes).append(f"{name} ({mode}): {e}")
                        log(f"phase {name} failed with namespaces {mode}: {e}")
                        for t in list(run.tenants.values()):
                            stop(t["p"])
                        run.tenants.clear()
                        run.quit_mps()
                        # Its reads are dropped: the retry's name tells them apart.
                        name = f"{name}-retry"
        except Exception as e:
            failures.append(f"setup: {e}")
            log(f"setup failed: {e}")
        finally:
            run.teardown()
            if sampler:
                corpus.stop(sampler, 1.0)
            clocks = corpus.read_clocks(clocks_csv) if corpus else []
            phases.write(json.dumps({"footer": True, "failures": failures, "retried": notes,
                                     "clocks": clocks}) + "\n")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())

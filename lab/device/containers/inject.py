"""What a CUDA process does when its CUDA_INJECTION64_PATH library cannot load, or loads and
fails: each case is a PyTorch process that initialises CUDA and runs one small computation,
with CUDA_INJECTION64_PATH set to one of target/ctr-inject's libraries (build.sh).

    inject.py --libs DIR --probe SO --out FILE.md [--dry]

Per case: the exit status, whether the computation gave its result, how long the process took,
and the last lines it wrote to stderr. TESSERA_PROBE_SOCKET points at a path nobody listens
on, so the probe itself returns at once (as on a node without tessera).
"""
import argparse
import json
import os
import subprocess
import sys
import time

PROGRAM = r"""
import sys, time
t = time.time()
try:
    import torch
    x = torch.ones(1 << 20, device="cuda")
    v = float((x * 2).sum().item())
    torch.cuda.synchronize()
    print(f"RESULT ok {v:.0f} in {time.time() - t:.2f}s", flush=True)
except Exception as e:
    print(f"RESULT error {type(e).__name__}: {str(e)[:160]}", flush=True)
    sys.exit(3)
"""
DRY_PROGRAM = r"""
import ctypes, os
lib = ctypes.CDLL(os.environ["CUDA_INJECTION64_PATH"], mode=os.RTLD_LAZY)
print("RESULT ok", lib.InitializeInjection(), flush=True)
"""

CASES = [
    ("no injection", None),
    ("path missing", "/nonexistent/libtessera_probe.so"),
    ("unresolved function (lazy)", "unresolved_func.so"),
    ("unresolved variable", "unresolved_data.so"),
    ("needs GLIBC_9.99", "glibc_too_new.so"),
    ("no InitializeInjection", "no_init.so"),
    ("InitializeInjection returns 0", "init_fails.so"),
    ("shipped probe (glibc 2.17), no tessera", "PROBE"),
]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--libs", required=True)
    ap.add_argument("--probe", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--dry", action="store_true")
    a = ap.parse_args()
    rows = []
    for name, lib in CASES:
        env = {k: v for k, v in os.environ.items() if not k.startswith(("CUDA_INJECTION64", "TESSERA_PROBE"))}
        env["TESSERA_PROBE_SOCKET"] = "/nonexistent/probe.sock"
        if lib == "PROBE":
            env["CUDA_INJECTION64_PATH"] = a.probe
        elif lib and lib.startswith("/"):
            env["CUDA_INJECTION64_PATH"] = lib
        elif lib:
            env["CUDA_INJECTION64_PATH"] = os.path.join(a.libs, lib)
        if a.dry and "CUDA_INJECTION64_PATH" not in env:
            rows.append({"case": name, "rc": 0, "result": "ok (dry: nothing to load)", "s": 0, "stderr": ""})
            continue
        t = time.time()
        try:
            p = subprocess.run([sys.executable, "-c", DRY_PROGRAM if a.dry else PROGRAM], env=env,
                               capture_output=True, text=True, timeout=45)
            rc, out, err = p.returncode, p.stdout, p.stderr
        except subprocess.TimeoutExpired as e:
            rc, out, err = "timeout", e.stdout or "", e.stderr or ""
            out, err = (out.decode() if isinstance(out, bytes) else out), (err.decode() if isinstance(err, bytes) else err)
        res = next((l[len("RESULT "):] for l in out.splitlines() if l.startswith("RESULT ")), "no result")
        lines = [l.strip() for l in err.splitlines() if l.strip() and "Warning" not in l][-2:]
        rows.append({"case": name, "lib": env.get("CUDA_INJECTION64_PATH"), "rc": rc, "result": res,
                     "s": round(time.time() - t, 2), "stderr": " / ".join(lines)[:300]})
        print(json.dumps(rows[-1]), flush=True)
    with open(a.out, "w") as f:
        f.write("| CUDA_INJECTION64_PATH | exit | computation | seconds | stderr (last lines) |\n")
        f.write("|---|---|---|---|---|\n")
        for r in rows:
            f.write(f"| {r['case']} | {r['rc']} | {r['result']} | {r['s']} | {r['stderr'].replace('|', '/')} |\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Realistic GPU tenants with a known truth, for tessera's per-process accuracy (issue 21).
  suite.py calibrate CALIB.json                       each kind alone: solo GPU ms per request
  suite.py run KIND UTIL START DUR OUT.json CALIB.json one tenant, Poisson arrivals
  suite.py kernels OUT.json                           each kind alone: per request, the event
                                                      span (as calibrate) and the time its kernels
                                                      ran (union of CUPTI's kernel records)
Kinds (requests draw sizes at random; every request ends with a sync, as a service returns):
  infer-graph  transformer encoder (6 layers, d 768, bf16), 4 request sizes, replayed as CUDA graphs
  infer-eager  the same model, run eagerly (launch-bound on small requests); its truth counts
               the graph's solo time per request (the same kernels, without the launch gaps)
  train        transformer training steps (AdamW), a data-loader gap (CPU batch + copy) between
  matmul       bf16 4096² matmul stream, 4 a request
  micro        64 elementwise kernels of a few µs a request (a CUDA graph)
  long         one bf16 16384² matmul a request (~10 ms kernels)
  xlong        one bf16 16384×16384 by 16384×49152 matmul a request (one ~40 ms kernel)
  holder       holds 4 GiB of GPU memory and spins a CPU core; launches nothing
UTIL sets the arrival rate: UTIL / mean solo request time. Truth = Σ solo time of the requests
served between START and START + DUR, over DUR (the issue's definition)."""
import json, math, os, random, sys, time
import torch

torch.backends.cuda.matmul.allow_tf32 = True
DEV = "cuda"
SIZES = {"infer-graph": [(1, 128), (4, 128), (8, 256), (16, 256)],
         "infer-eager": [(1, 128), (4, 128), (8, 256), (16, 256)]}
WEIGHTS = [0.4, 0.3, 0.2, 0.1]


def encoder(layers=6, d=768, heads=12):
    torch.manual_seed(0)
    layer = torch.nn.TransformerEncoderLayer(d, heads, 4 * d, batch_first=True, dropout=0.0)
    return torch.nn.TransformerEncoder(layer, layers, enable_nested_tensor=False).to(DEV, torch.bfloat16)


class Kind:
    """One workload: `sizes` request kinds, `serve(i)` issues request kind i (no sync)."""

    def __init__(self, kind):
        self.kind, self.sizes, self.weights = kind, [0], [1.0]
        if kind.startswith("infer"):
            self.model = encoder().eval()
            self.sizes, self.weights = list(range(4)), WEIGHTS
            self.inputs = [torch.randn(b, s, 768, device=DEV, dtype=torch.bfloat16) for b, s in SIZES[kind]]
            with torch.inference_mode():
                for x in self.inputs:
                    for _ in range(3): self.model(x)
            torch.cuda.synchronize()
            if kind == "infer-graph":
                self.graphs = []
                for x in self.inputs:
                    g = torch.cuda.CUDAGraph()
                    with torch.inference_mode(), torch.cuda.graph(g):
                        self.model(x)
                    self.graphs.append(g)
                torch.cuda.synchronize()
        elif kind == "train":
            self.model = torch.nn.Sequential(encoder(4, 512, 8), torch.nn.Linear(512, 512, device=DEV, dtype=torch.bfloat16))
            self.opt = torch.optim.AdamW(self.model.parameters(), lr=1e-4, fused=True)
            self.host = torch.randn(32, 256, 512, dtype=torch.bfloat16).pin_memory()
        elif kind == "matmul":
            self.a = torch.randn(4096, 4096, device=DEV, dtype=torch.bfloat16)
        elif kind == "micro":
            # A graph, so the µs kernels run back to back and their GPU time is the request's.
            self.v = torch.randn(262144, device=DEV)
            for _ in range(3): self.v.mul_(1.0)
            torch.cuda.synchronize()
            self.graph = torch.cuda.CUDAGraph()
            with torch.cuda.graph(self.graph):
                for _ in range(64): self.v.mul_(1.0001)
            torch.cuda.synchronize()
        elif kind == "long":
            self.a = torch.randn(16384, 16384, device=DEV, dtype=torch.bfloat16)
            self.out = torch.empty_like(self.a)
        elif kind == "xlong":
            self.a = torch.randn(16384, 16384, device=DEV, dtype=torch.bfloat16)
            self.b = torch.randn(16384, 49152, device=DEV, dtype=torch.bfloat16)
            self.out = torch.empty(16384, 49152, device=DEV, dtype=torch.bfloat16)

    def serve(self, i):
        k = self.kind
        if k == "infer-graph":
            self.graphs[i].replay()
        elif k == "infer-eager":
            with torch.inference_mode():
                self.model(self.inputs[i])
        elif k == "train":
            x = self.host.to(DEV, non_blocking=True)
            loss = self.model(x).float().pow(2).mean()
            self.opt.zero_grad(set_to_none=True)
            loss.backward()
            self.opt.step()
        elif k == "matmul":
            for _ in range(4): torch.mm(self.a, self.a)
        elif k == "micro":
            self.graph.replay()
        elif k == "long":
            torch.mm(self.a, self.a, out=self.out)
        elif k == "xlong":
            torch.mm(self.a, self.b, out=self.out)

    def gap(self):
        """CPU time between requests a real tenant spends outside the GPU: the data loader."""
        if self.kind == "train":
            self.host.copy_(torch.randn(32, 256, 512, dtype=torch.bfloat16))


def per_kind(out, default_kinds, measure, show):
    """Each kind alone, warmed up per request size: measure(w, i, start_event, end_event) gives
    one size's row; the rows go to OUT as {kind: [row per size]}."""
    res = {}
    for kind in os.environ.get("KINDS", default_kinds).split():
        w = Kind(kind)
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        rows = []
        for i in w.sizes:
            for _ in range(5): w.serve(i)
            torch.cuda.synchronize()
            rows.append(measure(w, i, s, e))
        res[kind] = rows
        print(kind, [show(r) for r in rows], flush=True)
        del w
        torch.cuda.empty_cache()
    json.dump(res, open(out, "w"))


def calibrate(out):
    def median_request_ms(w, i, s, e):
        t = []
        for _ in range(40):
            w.gap()
            s.record(); w.serve(i); e.record(); torch.cuda.synchronize()
            t.append(s.elapsed_time(e))
        t.sort()
        return t[len(t) // 2]
    per_kind(out, "infer-graph infer-eager train matmul micro long xlong", median_request_ms,
             lambda ms: round(ms, 3))


def kernel_union_ms(trace):
    """Milliseconds during which at least one kernel of the exported profiler trace ran."""
    spans = sorted((e["ts"], e["ts"] + e["dur"]) for e in trace["traceEvents"]
                   if e.get("cat") == "kernel")
    busy, end = 0.0, -math.inf
    for a, b in spans:
        if b <= end:
            continue
        busy += b - max(a, end)
        end = b
    return busy / 1000


def kernels(out):
    """GPU busy as NVML defines it (some kernel running), per request, beside the event span
    calibrate() measures: the event span also holds the gaps between a request's kernels."""
    from torch.profiler import profile, ProfilerActivity

    def kernel_and_event_ms(w, i, s, e):
        # Events and records of the same requests: a long matmul's clocks drift between two
        # separate loops more than the gaps this compares.
        n, spans = 40, []
        with profile(activities=[ProfilerActivity.CUDA]) as prof:
            for _ in range(n):
                s.record(); w.serve(i); e.record(); torch.cuda.synchronize()
                spans.append(s.elapsed_time(e))
        path = f"/tmp/kernels-{w.kind}-{i}.json"
        prof.export_chrome_trace(path)
        trace = json.load(open(path))
        os.remove(path)
        kernel_ms = kernel_union_ms(trace)
        return {"event_ms": sum(spans) / n, "kernel_ms": kernel_ms / n,
                "kernel_over_event": kernel_ms / sum(spans)}
    per_kind(out, "infer-graph infer-eager matmul micro long xlong", kernel_and_event_ms,
             lambda r: (round(r["event_ms"], 3), round(r["kernel_ms"], 3), round(r["kernel_over_event"], 3)))


def run(kind, util, start, dur, out, calib):
    if kind == "holder":
        hold = torch.empty(4 << 30, dtype=torch.uint8, device=DEV)
        torch.cuda.synchronize()
        while time.time() < start + dur:
            pass  # spin a core, launch nothing
        json.dump({"pid": os.getpid(), "kind": kind, "truth": 0.0, "served": 0}, open(out, "w"))
        del hold
        return
    # An eager request runs the graph's kernels with launch gaps between them: its GPU time
    # is the kernels', which the graph replay measures.
    solo = json.load(open(calib))["infer-graph" if kind == "infer-eager" else kind]
    w = Kind(kind)
    mean_ms = sum(p * m for p, m in zip(w.weights, solo))
    rate = util / (mean_ms / 1000)
    rng = random.Random(os.getpid())
    while time.time() < start: time.sleep(0.005)
    t, nxt, served, gpu_ms = start, start, [0] * len(w.sizes), 0.0
    end = start + dur
    while True:
        nxt += rng.expovariate(rate)
        if nxt >= end: break
        d = nxt - time.time()
        if d > 0: time.sleep(d)
        i = rng.choices(w.sizes, w.weights)[0]
        w.gap()
        w.serve(i)
        torch.cuda.synchronize()
        if time.time() <= end:
            served[i] += 1
            gpu_ms += solo[i]
    truth = gpu_ms / 1000 / dur
    json.dump({"pid": os.getpid(), "kind": kind, "util": util, "truth": truth, "served": served,
               "late_s": max(0.0, time.time() - end), "start": start, "dur": dur}, open(out, "w"))


if __name__ == "__main__":
    if sys.argv[1] == "calibrate":
        calibrate(sys.argv[2])
    elif sys.argv[1] == "kernels":
        kernels(sys.argv[2])
    else:
        run(sys.argv[2], float(sys.argv[3]), float(sys.argv[4]), float(sys.argv[5]), sys.argv[6], sys.argv[7])

"""Real-framework tenants for the exact-mode corpus (issue 32). Random weights, nothing
downloaded (HF_HUB_OFFLINE). Each kind builds a model and serves "requests" of a few classes;
`serve(i)` issues one request of class i and returns after a device sync, as a service does.

  tenants.py calib KIND OUT.json LOCK         build, then (holding LOCK, alone on the GPU)
                                              measure each class: CUDA-event ms and the union
                                              of its kernels' spans (PyTorch's profiler)
  tenants.py pool KIND SLOT DIR [RANK]        build, warm, write DIR/ready/SLOT, then serve the
                                              draws DIR/ctl/SLOT.json asks for; truth per draw
                                              in DIR/res/SLOT-DRAW.json

Calibration runs without the probe (PyTorch's profiler and the probe both use CUPTI); the pool
carries it. Truth of a draw = Σ over requests served inside [start, start+dur] of their class's
solo kernel ms, over dur (the issue's definition: kernel-time truth); `truth_event` the same
with CUDA-event ms (it counts launch gaps: higher for launch-bound eager tenants).

Kinds: hf-graph, hf-eager, timm, st-embed, train, cbatch, ddp (2 ranks, NCCL, GPUs 0 and 1),
holder (memory, a spinning core, no kernel), gemm (bf16 matmuls; the lying probes' tenant).
Issue 42's heavy kinds: enc-graph, enc-eager, gemm6k, mlp-train, timm-big; issue 54's long-kernel
kinds: gemm16k, prefill, conv-big, and the launch-bound eager decoder drawn beside them, dec-eager.

Every request served inside a draw is also logged, `reqs`: [mid-time, solo kernel ms], so a
read's truth can be taken over the read's own window (analyze.py), not the draw's mean."""
import argparse
import fcntl
import json
import math
import os
import random
import sys
import time

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

if os.environ.get("CORPUS_FAKE"):  # the driver's dry run on a machine without a GPU
    from fake_torch import torch  # noqa: E402
else:
    import torch  # noqa: E402

DEV = "cuda"
torch.backends.cuda.matmul.allow_tf32 = True


def llama(layers, d, seed):
    from transformers import LlamaConfig, LlamaForCausalLM
    torch.manual_seed(seed)
    cfg = LlamaConfig(hidden_size=d, intermediate_size=int(d * 2.75) // 64 * 64,
                      num_hidden_layers=layers, num_attention_heads=d // 64,
                      num_key_value_heads=max(1, d // 128), vocab_size=32000,
                      max_position_embeddings=1024)
    m = LlamaForCausalLM(cfg).to(DEV, torch.bfloat16).eval()
    # Random weights would stop at a random EOS: every request generates its full length.
    m.generation_config.eos_token_id = None
    m.generation_config.pad_token_id = 0
    return m


class HfGen:
    """Decoder generation: classes (batch, prompt, new tokens). `graph`: static KV cache and
    torch.compile(mode="reduce-overhead"), which captures CUDA graphs and replays them."""
    # Two classes of one prompt length: each shape is one more compilation (~tens of seconds
    # cold) for the graph kind, and the whole corpus must fit one device call.
    CLASSES = [(1, 64, 32), (4, 64, 32)]
    WEIGHTS = [0.6, 0.4]

    def __init__(self, graph, seed):
        self.model = llama(8, 1024, seed)
        self.kw = dict(do_sample=False, min_new_tokens=0)
        g = torch.Generator().manual_seed(seed)
        self.inputs = [torch.randint(5, 32000, (b, p), generator=g).to(DEV) for b, p, _ in self.CLASSES]
        self.classes, self.weights = list(range(len(self.CLASSES))), self.WEIGHTS
        if graph:
            # A static cache makes generate() compile its decoding step itself (transformers
            # >= 4.5x: `compile_config`, mode "reduce-overhead": CUDA graphs); wrapping forward
            # in torch.compile as well nests two compilations, whose graph replays overwrite
            # each other's outputs (run 1 of the corpus failed so).
            self.kw["cache_implementation"] = "static"
            if not hasattr(self.model, "get_compiled_call"):
                self.model.forward = torch.compile(self.model.forward, mode="reduce-overhead", fullgraph=True)
            else:
                from transformers import CompileConfig
                self.kw["compile_config"] = CompileConfig(fullgraph=True, mode="reduce-overhead")

    def serve(self, i):
        n = self.CLASSES[i][2]
        with torch.inference_mode():
            self.model.generate(self.inputs[i], max_new_tokens=n, **self.kw)
        torch.cuda.synchronize()


class Timm:
    CLASSES = [1, 8, 32]
    WEIGHTS = [0.4, 0.4, 0.2]

    def __init__(self, seed, classes=None):
        if classes:
            # timm-big (issue 42's heavy draws): batches whose kernels keep the GPU busy; at 1-32
            # a request is launch-bound and delivered 0.6-0.7 of the kernel time asked (run 12).
            self.CLASSES, self.WEIGHTS = classes, [1 / len(classes)] * len(classes)
        import timm
        torch.manual_seed(seed)
        self.model = timm.create_model("resnet50", pretrained=False).to(
            DEV, torch.bfloat16, memory_format=torch.channels_last).eval()
        self.inputs = [torch.randn(b, 3, 224, 224, device=DEV, dtype=torch.bfloat16)
                       .to(memory_format=torch.channels_last) for b in self.CLASSES]
        self.classes, self.weights = list(range(3)), self.WEIGHTS

    def serve(self, i):
        with torch.inference_mode():
            self.model(self.inputs[i])
        torch.cuda.synchronize()


WORDS = ("gpu kernel slice tenant probe time split node pod model batch token cache graph "
         "serve train loss step data loader queue request answer embed vector search index "
         "alpha beta gamma delta north south east west red green blue fast slow").split()


class StEmbed:
    """sentence-transformers over a BERT built from a config with random weights, saved to a
    private folder with a generated vocabulary so the library loads it without the hub."""
    CLASSES = [8, 32, 64]
    WEIGHTS = [0.5, 0.3, 0.2]

    def __init__(self, seed):
        from sentence_transformers import SentenceTransformer, models
        from transformers import BertConfig, BertModel, BertTokenizerFast
        path = f"/tmp/corpus-st-{os.getpid()}"
        os.makedirs(path, exist_ok=True)
        vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"] + WORDS
        with open(f"{path}/vocab.txt", "w") as f:
            f.write("\n".join(vocab) + "\n")
        BertTokenizerFast(vocab_file=f"{path}/vocab.txt").save_pretrained(path)
        torch.manual_seed(seed)
        BertModel(BertConfig(vocab_size=len(vocab), hidden_size=384, num_hidden_layers=6,
                             num_attention_heads=6, intermediate_size=1536)).save_pretrained(path)
        t = models.Transformer(path, max_seq_length=128)
        pool = models.Pooling(t.get_word_embedding_dimension(), "mean")
        self.model = SentenceTransformer(modules=[t, pool], device=DEV).half()
        rng = random.Random(seed)
        self.batches = [[" ".join(rng.choices(WORDS, k=rng.randint(8, 60))) for _ in range(b)]
                        for b in self.CLASSES]
        self.classes, self.weights = list(range(3)), self.WEIGHTS

    def serve(self, i):
        self.model.encode(self.batches[i], batch_size=len(self.batches[i]), convert_to_tensor=True,
                          show_progress_bar=False)
        torch.cuda.synchronize()


class Train:
    """Transformer training steps with fused AdamW; between steps, a data loader's CPU work
    (building the batch) and its copy to the device."""

    def __init__(self, seed):
        torch.manual_seed(seed)
        layer = torch.nn.TransformerEncoderLayer(512, 8, 2048, batch_first=True, dropout=0.1)
        self.model = torch.nn.Sequential(torch.nn.TransformerEncoder(layer, 4, enable_nested_tensor=False),
                                         torch.nn.Linear(512, 512)).to(DEV, torch.bfloat16)
        self.opt = torch.optim.AdamW(self.model.parameters(), lr=1e-4, fused=True)
        self.host = torch.empty(16, 256, 512, dtype=torch.bfloat16).pin_memory()
        self.classes, self.weights = [0], [1.0]

    def gap(self):
        self.host.copy_(torch.randn(16, 256, 512).to(torch.bfloat16))

    def serve(self, i):
        x = self.host.to(DEV, non_blocking=True)
        loss = self.model(x).float().pow(2).mean()
        self.opt.zero_grad(set_to_none=True)
        loss.backward()
        self.opt.step()
        torch.cuda.synchronize()


class CBatch:
    """Continuous batching as LLM servers do it: requests join a running batch and leave when
    their tokens are out. One step = one forward of the active requests' last 64 tokens (no KV
    cache: the step's cost follows the batch), padded to a bucket. Classes are the buckets."""
    BUCKETS = [1, 2, 4, 8, 16]

    def __init__(self, seed):
        self.model = llama(4, 768, seed)
        self.ids = [torch.randint(5, 32000, (b, 64), device=DEV) for b in self.BUCKETS]
        self.classes, self.weights = list(range(len(self.BUCKETS))), [1.0] * len(self.BUCKETS)

    def serve(self, i):
        with torch.inference_mode():
            self.model(self.ids[i])
        torch.cuda.synchronize()

    def bucket(self, n):
        return next(i for i, b in enumerate(self.BUCKETS) if b >= min(n, self.BUCKETS[-1]))


class Ddp:
    """One rank of a 2-GPU DDP job (NCCL all-reduce of the gradients each step)."""

    def __init__(self, seed, rank, store_file):
        import torch.distributed as dist
        torch.cuda.set_device(rank)
        global DEV
        DEV = f"cuda:{rank}"
        store = dist.FileStore(store_file, 2)
        dist.init_process_group("nccl", store=store, rank=rank, world_size=2)
        torch.manual_seed(seed)
        net = torch.nn.Sequential(*[torch.nn.Linear(4096, 4096) for _ in range(4)]).to(DEV, torch.bfloat16)
        self.model = torch.nn.parallel.DistributedDataParallel(net, device_ids=[rank])
        self.opt = torch.optim.AdamW(self.model.parameters(), lr=1e-4, fused=True)
        self.x = torch.randn(2048, 4096, device=DEV, dtype=torch.bfloat16)
        self.classes, self.weights = [0], [1.0]

    def serve(self, i):
        loss = self.model(self.x).float().pow(2).mean()
        self.opt.zero_grad(set_to_none=True)
        loss.backward()
        self.opt.step()
        torch.cuda.synchronize()


class Gemm:
    """A bf16 matmul stream, as a fine-tuning or batch-scoring job runs: kernel-bound, its
    kernel time is most of its wall time. The liars run it, so that what they lie about is
    points of the device, not fractions of one (run 3's liars were launch-bound tenants whose
    every lie was under a point)."""
    SIZES = [2048, 4096]
    WEIGHTS = [0.5, 0.5]

    def __init__(self, seed):
        torch.manual_seed(seed)
        self.ab = [(torch.randn(n, n, device=DEV, dtype=torch.bfloat16),
                    torch.randn(n, n, device=DEV, dtype=torch.bfloat16)) for n in self.SIZES]
        self.classes, self.weights = list(range(len(self.SIZES))), self.WEIGHTS

    def serve(self, i):
        a, b = self.ab[i]
        for _ in range(8):
            a @ b
        torch.cuda.synchronize()


class Encoder:
    """A 6-layer transformer encoder (d 2048, 16 heads, FFN 8192, sequence 512) in bf16 serving
    batches of 2, 8 and 16 (issue 42's tenant): kernel-bound at 8-16, its kernels a tenth of a
    millisecond to a millisecond. `graph`: one CUDA graph captured per batch and replayed, as a
    serving stack with CUDA graphs does; otherwise eager."""
    CLASSES = [2, 8, 16]
    WEIGHTS = [0.3, 0.4, 0.3]

    def __init__(self, graph, seed):
        torch.manual_seed(seed)
        layer = torch.nn.TransformerEncoderLayer(2048, 16, 8192, batch_first=True, dropout=0.0)
        self.model = torch.nn.TransformerEncoder(layer, 6, enable_nested_tensor=False).to(
            DEV, torch.bfloat16).eval()
        self.inputs = [torch.randn(b, 512, 2048, device=DEV, dtype=torch.bfloat16) for b in self.CLASSES]
        self.classes, self.weights = list(range(len(self.CLASSES))), self.WEIGHTS
        self.graphs = []
        if graph and not os.environ.get("CORPUS_FAKE"):
            side = torch.cuda.Stream()
            side.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(side), torch.inference_mode():
                for x in self.inputs:
                    for _ in range(3):
                        self.model(x)
            torch.cuda.current_stream().wait_stream(side)
            self.outputs = []
            try:
                self.capture()
            except RuntimeError as e:
                # The encoder's fused fast path, where this torch cannot capture it: the same
                # layers through the plain path, said in the log.
                print("graph capture failed on the fast path, capturing without it:", e, file=sys.stderr)
                torch.backends.mha.set_fastpath_enabled(False)
                self.graphs, self.outputs = [], []
                self.capture()

    def capture(self):
        for x in self.inputs:
            g = torch.cuda.CUDAGraph()
            with torch.inference_mode(), torch.cuda.graph(g):
                self.outputs.append(self.model(x))
            self.graphs.append(g)

    def serve(self, i):
        if self.graphs:
            self.graphs[i].replay()
        else:
            with torch.inference_mode():
                self.model(self.inputs[i])
        torch.cuda.synchronize()


class Gemm6k:
    """A bf16 6144 x 6144 GEMM stream (issue 42): each matmul ~0.7 ms on an H100, a request two
    or four of them back to back."""
    SIZE = 6144
    CLASSES = [2, 4]
    WEIGHTS = [0.5, 0.5]

    def __init__(self, seed):
        torch.manual_seed(seed)
        self.a = torch.randn(self.SIZE, self.SIZE, device=DEV, dtype=torch.bfloat16)
        self.b = torch.randn(self.SIZE, self.SIZE, device=DEV, dtype=torch.bfloat16)
        self.classes, self.weights = list(range(len(self.CLASSES))), self.WEIGHTS

    def serve(self, i):
        for _ in range(self.CLASSES[i]):
            self.a @ self.b
        torch.cuda.synchronize()


class MlpTrain:
    """Training steps of a 4-layer MLP (4096 wide, GELU) on a large batch (16,384 rows) with
    fused AdamW (issue 42): multi-millisecond GEMMs, the kind whose kernels outlast time slices."""

    def __init__(self, seed):
        torch.manual_seed(seed)
        layers = []
        for _ in range(4):
            layers += [torch.nn.Linear(4096, 4096), torch.nn.GELU()]
        self.model = torch.nn.Sequential(*layers).to(DEV, torch.bfloat16)
        self.opt = torch.optim.AdamW(self.model.parameters(), lr=1e-4, fused=True)
        self.x = torch.randn(16384, 4096, device=DEV, dtype=torch.bfloat16)
        self.classes, self.weights = [0], [1.0]

    def serve(self, i):
        loss = self.model(self.x).float().pow(2).mean()
        self.opt.zero_grad(set_to_none=True)
        loss.backward()
        self.opt.step()
        torch.cuda.synchronize()


class Gemm16k(Gemm6k):
    """A bf16 16384 x 16384 GEMM stream (issue 54's long kernels): each matmul ~12 ms, far past
    a time slice; a request one or two of them back to back."""
    SIZE = 16384
    CLASSES = [1, 2]


class Prefill:
    """A long-prompt prefill (issue 54): two transformer layers (d 4096, 32 heads of 128, FFN
    11008) over one prompt of 16k or 24k tokens, causal flash attention; kernels of 1-8 ms."""
    CLASSES = [16384, 24576]
    WEIGHTS = [0.5, 0.5]

    def __init__(self, seed):
        torch.manual_seed(seed)
        d, f = 4096, 11008
        mk = lambda *s: torch.randn(*s, device=DEV, dtype=torch.bfloat16) * 0.02  # noqa: E731
        self.layers = [(mk(d, 3 * d), mk(d, d), mk(d, 2 * f), mk(f, d)) for _ in range(2)]
        self.inputs = [mk(n, d) for n in self.CLASSES]
        self.classes, self.weights = list(range(len(self.CLASSES))), self.WEIGHTS

    def serve(self, i):
        import torch.nn.functional as F
        x = self.inputs[i]
        n = x.shape[0]
        with torch.inference_mode():
            for wqkv, wo, wup, wdown in self.layers:
                q, k, v = (x @ wqkv).view(n, 3, 32, 128).permute(1, 2, 0, 3).unsqueeze(1)
                a = F.scaled_dot_product_attention(q, k, v, is_causal=True)
                x = x + a.squeeze(0).permute(1, 0, 2).reshape(n, 4096) @ wo
                g, u = (x @ wup).chunk(2, dim=-1)
                x = x + (F.silu(g) * u) @ wdown
        torch.cuda.synchronize()


class ConvBig:
    """A large-batch convolution (issue 54): a 3x3, 128-channel conv over 112x112 images at
    batch 128 or 256 in bf16 (channels last), then a ReLU: kernels of a few milliseconds."""
    CLASSES = [128, 256]
    WEIGHTS = [0.5, 0.5]

    def __init__(self, seed):
        torch.manual_seed(seed)
        torch.backends.cudnn.benchmark = True
        self.conv = torch.nn.Conv2d(128, 128, 3, padding=1).to(
            DEV, torch.bfloat16, memory_format=torch.channels_last).eval()
        self.inputs = [torch.randn(b, 128, 112, 112, device=DEV, dtype=torch.bfloat16)
                       .to(memory_format=torch.channels_last) for b in self.CLASSES]
        self.classes, self.weights = list(range(len(self.CLASSES))), self.WEIGHTS

    def serve(self, i):
        with torch.inference_mode():
            torch.relu_(self.conv(self.inputs[i]))
        torch.cuda.synchronize()


class DecEager:
    """An eager LLM-style decoder (issue 54's launch-bound tenant): 12 layers, d 1024, 16 heads,
    a preallocated KV cache of 1024, greedy decoding of 32 tokens from position 512 at batch 1,
    8 or 32, in plain PyTorch: ~20 small kernels a layer, launched one by one from Python."""
    CLASSES = [1, 8, 32]
    WEIGHTS = [0.4, 0.4, 0.2]
    LAYERS, D, HEADS, CACHE, START, NEW, VOCAB = 12, 1024, 16, 1024, 512, 32, 32000

    def __init__(self, seed):
        torch.manual_seed(seed)
        d, f = self.D, 2816
        mk = lambda *s: torch.randn(*s, device=DEV, dtype=torch.bfloat16) * 0.02  # noqa: E731
        self.emb, self.head = mk(self.VOCAB, d), mk(d, self.VOCAB)
        self.layers = [(mk(d, 3 * d), mk(d, d), mk(d, 2 * f), mk(f, d), torch.ones(d, device=DEV,
                        dtype=torch.bfloat16), torch.ones(d, device=DEV, dtype=torch.bfloat16))
                       for _ in range(self.LAYERS)]
        self.caches = {b: [(torch.randn(b, self.HEADS, self.CACHE, d // self.HEADS, device=DEV, dtype=torch.bfloat16),
                            torch.randn(b, self.HEADS, self.CACHE, d // self.HEADS, device=DEV, dtype=torch.bfloat16))
                           for _ in range(self.LAYERS)] for b in self.CLASSES}
        self.tokens = {b: torch.randint(5, self.VOCAB, (b,), device=DEV) for b in self.CLASSES}
        self.classes, self.weights = list(range(len(self.CLASSES))), self.WEIGHTS

    @staticmethod
    def norm(x, w):
        return x * torch.rsqrt(x.float().pow(2).mean(-1, keepdim=True) + 1e-6).to(x.dtype) * w

    def serve(self, i):
        import torch.nn.functional as F
        b = self.CLASSES[i]
        h, hd = self.HEADS, self.D // self.HEADS
        tok = self.tokens[b]
        with torch.inference_mode():
            for step in range(self.NEW):
                pos = self.START + step
                x = self.emb[tok]
                for (wqkv, wo, wup, wdown, n1, n2), (kc, vc) in zip(self.layers, self.caches[b]):
                    q, k, v = (self.norm(x, n1) @ wqkv).view(b, 3, h, 1, hd).unbind(1)
                    kc[:, :, pos:pos + 1].copy_(k)
                    vc[:, :, pos:pos + 1].copy_(v)
                    a = F.scaled_dot_product_attention(q, kc[:, :, :pos + 1], vc[:, :, :pos + 1])
                    x = x + a.reshape(b, self.D) @ wo
                    g, u = (self.norm(x, n2) @ wup).chunk(2, dim=-1)
                    x = x + (F.silu(g) * u) @ wdown
                tok = (x @ self.head).argmax(-1)
        torch.cuda.synchronize()


class Holder:
    """Holds 2 GiB of device memory and, during a draw, spins a CPU core; launches nothing.
    Its truth is 0: with its probe on it must count idle."""

    def __init__(self):
        self.hold = torch.empty(2 << 30, dtype=torch.uint8, device=DEV)
        torch.cuda.synchronize()
        self.classes, self.weights = [0], [1.0]

    def serve(self, i):
        pass


def build(kind, seed, rank=0, store_file="/tmp/corpus-ddp-store"):
    if os.environ.get("CORPUS_FAKE"):
        from fake_torch import FakeKind
        return FakeKind(kind)
    if kind == "holder":
        return Holder()
    if kind == "hf-graph":
        return HfGen(True, seed)
    if kind == "hf-eager":
        return HfGen(False, seed)
    if kind == "timm":
        return Timm(seed)
    if kind == "timm-big":
        return Timm(seed, [32, 64, 128])
    if kind == "st-embed":
        return StEmbed(seed)
    if kind == "train":
        return Train(seed)
    if kind == "cbatch":
        return CBatch(seed)
    if kind == "ddp":
        return Ddp(seed, rank, store_file)
    if kind == "gemm":
        return Gemm(seed)
    if kind == "enc-graph":
        return Encoder(True, seed)
    if kind == "enc-eager":
        return Encoder(False, seed)
    if kind == "gemm6k":
        return Gemm6k(seed)
    if kind == "mlp-train":
        return MlpTrain(seed)
    if kind == "gemm16k":
        return Gemm16k(seed)
    if kind == "prefill":
        return Prefill(seed)
    if kind == "conv-big":
        return ConvBig(seed)
    if kind == "dec-eager":
        return DecEager(seed)
    raise SystemExit(f"unknown kind {kind}")


def warm(w, n=4):
    for i in w.classes:
        for _ in range(n):
            getattr(w, "gap", lambda: None)()
            w.serve(i)


def kernel_union_ms(trace):
    """(union of kernel spans ms, sum of kernel durations ms, kernels): the sum and count tell
    side-by-side streams and kernel counts apart when a truth is in doubt."""
    spans = sorted((e["ts"], e["ts"] + e["dur"]) for e in trace.get("traceEvents", [])
                   if e.get("cat") == "kernel" and "dur" in e)
    busy, end = 0.0, -math.inf
    for a, b in spans:
        if b <= end:
            continue
        busy += b - max(a, end)
        end = b
    return busy / 1000, sum(b - a for a, b in spans) / 1000, len(spans)


def measure(w, i, n):
    """Median CUDA-event ms of n requests of class i, and their kernels' span union per
    request (PyTorch's profiler: CUPTI's kernel records, graph replays' kernels included)."""
    s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    ev = []

    def loop():
        for _ in range(n):
            getattr(w, "gap", lambda: None)()
            s.record(); w.serve(i); e.record(); torch.cuda.synchronize()
            ev.append(s.elapsed_time(e))
    extra = {}
    if os.environ.get("CORPUS_FAKE"):
        loop()
        k = sum(ev)
    else:
        try:
            from torch.profiler import profile, ProfilerActivity
            with profile(activities=[ProfilerActivity.CUDA]) as prof:
                loop()
            path = f"/tmp/corpus-trace-{os.getpid()}.json"
            prof.export_chrome_trace(path)
            with open(path) as f:
                k, k_sum, count = kernel_union_ms(json.load(f))
            extra = {"kernel_sum_ms": k_sum / n, "kernels": count / n}
            os.remove(path)
        except Exception as exc:  # reported in the calibration: the truth is then event time
            print("profiler failed, kernel ms from events:", exc, file=sys.stderr)
            ev.clear()
            loop()
            k = sum(ev)
    ev.sort()
    return ev[n // 2], k / n, extra


def graph_launches(w):
    """CUDA graph launches in one request of class 0 (the graph kind must replay graphs, or it
    is one more eager tenant): counted from the profiler's runtime events."""
    if os.environ.get("CORPUS_FAKE"):
        return 0
    try:
        from torch.profiler import profile, ProfilerActivity
        with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
            w.serve(0)
        return sum(e.count for e in prof.key_averages() if "GraphLaunch" in e.key)
    except Exception as exc:
        print("graph launch count failed:", exc, file=sys.stderr)
        return None


def calib(kind, out, lock, rank=0, store_dir="/tmp"):
    """Each class alone: median CUDA-event ms of 15 requests, and the union of their kernels'
    spans per request (profiler), measured while holding LOCK so no other calibration runs."""
    t0 = time.time()
    w = build(kind, 1000 + rank, rank, f"{store_dir}/ddp-calib")
    warm(w)
    built = time.time() - t0
    # Measure only once every calibration has built (a build warms kernels on the GPU) and one
    # at a time; rank 1 of the DDP job follows rank 0 (it waits on it in every all-reduce).
    lk = open(lock, "w")
    open(f"{store_dir}/built/{kind}-{rank}", "w").close()
    while not os.path.exists(f"{store_dir}/go"):
        time.sleep(0.05)
    if rank == 0:
        fcntl.flock(lk, fcntl.LOCK_EX)
    if rank == 0 and kind == "ddp":
        open(f"{store_dir}/ddp-measuring", "w").close()
    if rank == 1:  # measures beside rank 0, not while rank 0 waits for the lock
        while not os.path.exists(f"{store_dir}/ddp-measuring"):
            time.sleep(0.05)
    rows = []
    measured_from = time.time()
    for i in w.classes:
        ev, k, extra = measure(w, i, 15)
        rows.append({"event_ms": ev, "kernel_ms": k, **extra})
    measured_to = time.time()
    graphs = graph_launches(w) if kind == "hf-graph" else None
    fcntl.flock(lk, fcntl.LOCK_UN)
    lk.close()
    with open(out, "w") as f:
        # When it was measured: the SM clock then (the driver's clock log) against the clock
        # while it serves is the truth's uncertainty (issue 42, run 12: 1695-1980 MHz).
        json.dump({"kind": kind, "rank": rank, "build_s": round(built, 1), "classes": rows,
                   "measured": [measured_from, measured_to],
                   "graph_launches_per_request": graphs}, f)
    print(kind, rank, f"built {built:.0f} s", [(round(r["event_ms"], 3), round(r["kernel_ms"], 3)) for r in rows],
          flush=True)


def arrivals(rng, arrival, rate, start, end):
    """Request times: poisson, bursty (Poisson at 4x the rate, on 1/4 of 2-s periods) or
    periodic (fixed interval, a small jitter)."""
    t, out = start, []
    while True:
        if arrival == "periodic":
            t += (1 / rate) * rng.uniform(0.9, 1.1)
        elif arrival == "bursty":
            t += rng.expovariate(4 * rate)
            period = (t - start) % 2.0
            if period > 0.5:
                t += 2.0 - period
        else:
            t += rng.expovariate(rate)
        if t >= end:
            return out
        out.append(t)


def serve_draw(w, kind, c, cal, rate_cal):
    """Serves one draw's schedule; returns the result record (truth and what was served)."""
    rng = random.Random(c["seed"])
    k_ms = [r["kernel_ms"] for r in cal["classes"]]
    e_ms = [r["event_ms"] for r in cal["classes"]]
    start, dur = c["start"], c["dur"]
    end = start + dur
    served, kernel, event, late = [0] * len(w.classes), 0.0, 0.0, 0.0
    reqs = []
    if kind == "cbatch":
        mean_len = 36
        step_ms = k_ms[0] if c.get("rate_by") == "kernel" else e_ms[0]
        rate = c["duty"] / (mean_len * step_ms / 1000)
        times = arrivals(rng, c["arrival"], rate, start, end)
        active, steps = [], 0
        while time.time() < start:
            time.sleep(0.002)
        while True:
            now = time.time()
            while times and times[0] <= now:
                times.pop(0)
                active.append(rng.randint(8, 64))
            if not active:
                if not times:
                    break
                time.sleep(max(0.0, min(times[0] - now, 0.05)))
                continue
            b = w.bucket(len(active))
            t0 = time.time()
            w.serve(b)
            steps += 1
            t1 = time.time()
            if t1 <= end:
                served[b] += 1
                kernel += k_ms[b]
                event += e_ms[b]
                reqs.append([round((t0 + t1) / 2, 4), round(k_ms[b], 4)])
            active = [n - 1 for n in active if n > 1]
            if time.time() > end + 1:
                break
        return {"served": served, "truth": kernel / 1000 / dur, "truth_event": event / 1000 / dur,
                "steps": steps, "late_s": max(0.0, time.time() - end), "reqs": reqs}
    # Issue 42: the rate from each class's kernel time, so that the draw asks for kernel time
    # (what the truth counts); earlier runs' plans asked in event time (a launch-bound tenant then
    # delivered a fifth to a twenty-fifth of its duty as kernel time).
    r_ms = [r["kernel_ms" if c.get("rate_by") == "kernel" else "event_ms"] for r in rate_cal["classes"]]
    if kind == "holder":
        while time.time() < end:
            pass  # spin a core, launch nothing
        return {"served": served, "truth": 0.0, "truth_event": 0.0, "late_s": 0.0}
    mean_ms = sum(p * m for p, m in zip(w.weights, r_ms)) / sum(w.weights)
    rate = c["duty"] / (mean_ms / 1000)
    times = arrivals(rng, c["arrival"], rate, start, end)
    if kind == "ddp":
        times = times[: c.get("steps", len(times))]  # both ranks run the same steps
    for t in times:
        d = t - time.time()
        if d > 0:
            time.sleep(d)
        i = rng.choices(w.classes, w.weights)[0]
        getattr(w, "gap", lambda: None)()
        t0 = time.time()
        w.serve(i)
        t1 = time.time()
        if t1 <= end:
            served[i] += 1
            kernel += k_ms[i]
            event += e_ms[i]
            reqs.append([round((t0 + t1) / 2, 4), round(k_ms[i], 4)])
        elif kind != "ddp":
            break
    late = max(0.0, time.time() - end)
    return {"served": served, "truth": kernel / 1000 / dur, "truth_event": event / 1000 / dur,
            "late_s": late, "reqs": reqs}


class Liar:
    """A lying probe in a tenant that runs without the real one: it speaks the probe's wire
    (version 1, totals only, as tests/e2e/probe.rs's fake clients do) and claims `factor`
    times the draw's duty while a draw runs (under: 0.25, over: 2.0), or, `silent`, the duty
    for 3 s and then nothing while its process keeps launching kernels."""
    FACTOR = {"under": 0.25, "over": 2.0, "silent": 1.0}

    def __init__(self, how, socket_path):
        import threading
        self.how, self.path, self.rate, self.silent_after = how, socket_path, 0.0, None
        threading.Thread(target=self.run, daemon=True).start()

    def draw(self, duty, start):
        """`duty` here is the tenant's expected kernel-time share, what an honest probe says."""
        self.rate = min(0.95, duty * self.FACTOR[self.how])
        self.silent_after = start + 3 if self.how == "silent" else None

    def idle(self):
        self.rate, self.silent_after = 0.0, None

    def run(self):
        import socket
        import struct
        s = None
        while s is None:
            try:
                s = socket.socket(socket.AF_UNIX)
                s.connect(self.path)
            except OSError:
                s = None
                time.sleep(0.1)
        busy, kernels, last = 0.0, 0, time.time()
        while True:
            now = time.time()
            busy += (now - last) * self.rate
            last = now
            kernels += 10 if self.rate > 0 else 0
            if self.silent_after is None or now < self.silent_after:
                try:
                    s.sendall(b"TSP1" + struct.pack("<IQQII", 1, int(busy * 1e9), kernels, 0, 0))
                except OSError:
                    return
            time.sleep(0.2)


class ForgingRelay:
    """A tenant that lies with a plausible timeline (issue 42): its process carries the real
    probe, pointed at this relay's socket, and the relay (a thread of the same process, so
    tessera sees the tenant's own pid) passes tessera's control messages back and forwards every
    frame with its kernel time scaled by `factor`: the busy total, and each millisecond's covered
    and solo time (capped at the millisecond). What tessera hears is the current wire and a
    timeline shaped like the tenant's own, off by the factor."""
    FACTOR = {"forge-over20": 1.2, "forge-under20": 0.8, "forge-over50": 1.5, "forge-under50": 0.5}

    def __init__(self, how, own_path, tessera_path):
        import socket
        import threading
        self.factor, self.tessera_path = self.FACTOR[how], tessera_path
        try:
            os.unlink(own_path)
        except OSError:
            pass
        self.server = socket.socket(socket.AF_UNIX)
        self.server.bind(own_path)
        self.server.listen(4)
        threading.Thread(target=self.accept, daemon=True).start()

    def accept(self):
        import threading
        while True:
            conn, _ = self.server.accept()
            threading.Thread(target=self.relay, args=(conn,), daemon=True).start()

    def relay(self, probe):
        import selectors
        import socket
        up = socket.socket(socket.AF_UNIX)
        try:
            up.connect(self.tessera_path)
        except OSError:
            probe.close()
            return
        sel = selectors.DefaultSelector()
        sel.register(probe, selectors.EVENT_READ, "probe")
        sel.register(up, selectors.EVENT_READ, "up")
        buf = b""
        while True:
            for key, _ in sel.select():
                data = key.fileobj.recv(1 << 16)
                if not data:
                    probe.close()
                    up.close()
                    return
                if key.data == "up":
                    probe.sendall(data)  # tessera's control messages, untouched
                    continue
                buf += data
                while True:
                    frame, buf = self.take_frame(buf)
                    if frame is None:
                        break
                    up.sendall(frame)

    def take_frame(self, buf):
        """One whole frame off the front of `buf`, forged; (None, buf) until one is whole."""
        import struct
        if len(buf) < 32:
            return None, buf
        version = struct.unpack_from("<I", buf, 4)[0]
        if version < 2:
            head, count = 32, 0
        else:
            if len(buf) < 64:
                return None, buf
            count = struct.unpack_from("<I", buf, 56)[0]
            head = 72 if version >= 3 else 64
        width = 6 if version >= 4 else 4  # version 4 adds each millisecond's floor
        n = head + width * count
        if len(buf) < n:
            return None, buf
        f = bytearray(buf[:n])
        busy = struct.unpack_from("<Q", f, 8)[0]
        struct.pack_into("<Q", f, 8, int(busy * self.factor))
        for k in range(count):
            at = head + width * k
            cov, solo = struct.unpack_from("<HH", f, at)
            if cov == 0xFFFF:  # untraced stays untraced
                continue
            cov2 = min(1000, round(cov * self.factor))
            solo2 = min(cov2, round(solo * self.factor))
            struct.pack_into("<HH", f, at, cov2, solo2)
            if width == 6:
                floor = struct.unpack_from("<H", f, at + 4)[0]
                struct.pack_into("<H", f, at + 4, min(solo2, round(floor * self.factor)))
        return bytes(f), buf[n:]


def write_whole(path, obj):
    """Written aside and renamed: the driver reads a result as soon as its name appears, and a
    draw's request log runs to thousands of entries (run 12 read a third of its gemm results
    half-written and lost them as "no result")."""
    with open(path + ".tmp", "w") as f:
        json.dump(obj, f)
    os.replace(path + ".tmp", path)


def pool(kind, slot, d, rank=0, liar=None):
    """A warmed tenant waiting for draws: idle (asleep, polling its control file) between."""
    seed = int(slot.split("-")[-1]) if slot.split("-")[-1].isdigit() else 0
    forger = None
    if liar in ForgingRelay.FACTOR:
        # Before CUDA starts: the probe reads its socket's path at cuInit.
        tessera_path = os.environ.get("TESSERA_PROBE_SOCKET", "/tmp/tessera-probe.sock")
        own = f"{d}/forge-{slot}.sock"
        forger = ForgingRelay(liar, own, tessera_path)
        os.environ["TESSERA_PROBE_SOCKET"] = own
    w = build(kind, seed, rank, f"{d}/ddp-{os.environ.get('CORPUS_PHASE', 'pool')}")
    warm(w)
    fake = Liar(liar, os.environ.get("TESSERA_PROBE_SOCKET", "/tmp/tessera-probe.sock")) \
        if liar and not forger else None
    cal_path = f"{d}/calib/{kind}-{rank}.json"
    write_whole(f"{d}/ready/{slot}", {"pid": os.getpid(), "kind": kind, "rank": rank})
    done = set()
    while True:
        try:
            with open(f"{d}/ctl/{slot}.json") as f:
                c = json.load(f)
        except (OSError, ValueError):
            time.sleep(0.05)
            continue
        if c.get("quit"):
            return
        if c["draw"] in done:
            time.sleep(0.05)
            continue
        done.add(c["draw"])
        res = {"slot": slot, "kind": kind, "rank": rank, "pid": os.getpid(), "draw": c["draw"],
               "duty": c["duty"], "arrival": c["arrival"], "seed": c["seed"]}
        try:
            with open(cal_path) as f:
                cal = json.load(f)
            if forger:
                res["liar"] = liar
            if fake:  # lies about its kernel time, not about its requests' wall time
                k = sum(p * r["kernel_ms"] for p, r in zip(w.weights, cal["classes"]))
                e = sum(p * r["event_ms"] for p, r in zip(w.weights, cal["classes"]))
                fake.draw(c["duty"] * k / e if e > 0 else c["duty"], c["start"])
                res["liar"] = liar
            rate_cal = cal
            if kind == "ddp":  # both ranks draw the same steps: the rate from rank 0's
                with open(f"{d}/calib/ddp-0.json") as f:
                    rate_cal = json.load(f)
            res.update(serve_draw(w, kind, c, cal, rate_cal))
        except Exception as e:  # a crash is a result of the draw, not the end of the pool
            res["error"] = f"{type(e).__name__}: {e}"
        if fake:
            fake.idle()
        write_whole(f"{d}/res/{slot}-{c['draw']}.json", res)


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="cmd", required=True)
    a = sub.add_parser("calib")
    a.add_argument("kind"); a.add_argument("out"); a.add_argument("lock")
    a.add_argument("--rank", type=int, default=0)
    a.add_argument("--store", default="/tmp", help="the run's folder: built/, go, the DDP store")
    b = sub.add_parser("pool")
    b.add_argument("kind"); b.add_argument("slot"); b.add_argument("dir")
    b.add_argument("--rank", type=int, default=0)
    b.add_argument("--liar", choices=sorted(Liar.FACTOR) + sorted(ForgingRelay.FACTOR))
    args = p.parse_args()
    if args.cmd == "calib":
        calib(args.kind, args.out, args.lock, args.rank, args.store)
    else:
        pool(args.kind, args.slot, args.dir, args.rank, args.liar)


if __name__ == "__main__":
    sys.exit(main())

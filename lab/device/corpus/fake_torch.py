"""Stand-ins for torch and the tenants, for driver.py's dry run on a machine without a GPU
(CORPUS_FAKE=1): requests sleep instead of launching kernels."""
import time
import types


class _Event:
    def __init__(self, enable_timing=False):
        self.t = 0.0

    def record(self):
        self.t = time.time()

    def elapsed_time(self, other):
        return (other.t - self.t) * 1000


torch = types.SimpleNamespace(
    backends=types.SimpleNamespace(cuda=types.SimpleNamespace(matmul=types.SimpleNamespace(allow_tf32=True))),
    cuda=types.SimpleNamespace(Event=_Event, synchronize=lambda: None))


class FakeKind:
    MS = {"hf-graph": [20, 40], "hf-eager": [60, 90], "timm": [3, 8, 25], "st-embed": [4, 9, 15],
          "train": [30], "cbatch": [2, 3, 4, 6, 9], "ddp": [25], "holder": [0], "gemm": [1, 6],
          "enc-graph": [2, 6, 11], "enc-eager": [3, 8, 14], "gemm6k": [2, 3], "mlp-train": [12],
          "timm-big": [3, 6, 12],
          "gemm16k": [12, 24], "prefill": [20, 40], "conv-big": [5, 10], "dec-eager": [40, 60, 90]}

    def __init__(self, kind):
        self.kind, self.ms = kind, self.MS[kind]
        self.classes, self.weights = list(range(len(self.ms))), [1.0] * len(self.ms)
        time.sleep(0.5)

    def serve(self, i):
        time.sleep(self.ms[i] / 1000)

    def bucket(self, n):
        return min(len(self.ms) - 1, max(0, n.bit_length() - 1))

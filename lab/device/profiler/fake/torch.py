"""A stand-in for torch, for profiler.py's dry run without a GPU: work sleeps, the profiler
writes a trace of made-up kernels. PYTHONPATH=lab/device/profiler/fake (see profiler.py)."""
import contextlib
import json
import time
import types

half, bfloat16 = "half", "bfloat16"


def device(name):
    return name


class _T:
    def __init__(self, n=1):
        self.n = n

    def add_(self, v):
        time.sleep(2e-6)
        return self


def randn(*shape, device=None, dtype=None):
    return _T()


def zeros(*shape, device=None, dtype=None):
    return _T()


def matmul(a, b):
    time.sleep(0.0016)


def no_grad():
    return contextlib.nullcontext()


class _Module:
    def __init__(self, *a, **k):
        self.layers = [x for x in a if isinstance(x, _Module)]

    def to(self, *a):
        return self

    def half(self):
        return self

    def eval(self):
        return self

    def __call__(self, x):
        time.sleep(0.001 if self.layers else 0.0)
        return x


nn = types.SimpleNamespace(Linear=_Module, GELU=_Module, LayerNorm=_Module, Sequential=_Module)
cuda = types.SimpleNamespace(synchronize=lambda: None, device_count=lambda: 0)


class _Profile:
    def __init__(self, activities=None):
        self.t0 = None

    def __enter__(self):
        self.t0 = time.time()
        return self

    def __exit__(self, *a):
        time.sleep(0.5)

    def export_chrome_trace(self, path):
        with open(path, "w") as f:
            json.dump({"traceEvents": [{"cat": "kernel", "ph": "X", "dur": 1000} for _ in range(30)]}, f)


profiler = types.SimpleNamespace(ProfilerActivity=types.SimpleNamespace(CPU=0, CUDA=1), profile=_Profile)
__version__ = "fake"

"""On a CUDA GPU: a candidate that makes an illegal memory access, exhausts GPU memory or hangs in a kernel costs
only itself (a clear error, the worker replaced) and the next evaluation on the same evaluator succeeds; a sandboxed
worker still reaches the GPU, and has no network. Skipped where no GPU is present.

The faulty candidates use the fast path (``cuda_kernel``: nvcc -cubin, under a second), so only the closing
correct evaluation builds with ``load_inline`` (once per cache)."""

from __future__ import annotations

import pytest
import torch

from conftest import ROOT, no_hang, read
from kbench_env.pipeline.evaluator import Evaluator
from kbench_env.sandbox.confine.policy import Limits
from kbench_env.tasks.suite import resolve_task

pytestmark = pytest.mark.gpu

RELU = resolve_task("level1/relu")
RELU_CUDA = read(ROOT / "tasks/solutions/cuda/level1/relu.py")
TIMING = {"warmup": 1, "min_reps": 3, "max_reps": 20, "min_seconds": 0.02}

_HEAD = '''
import torch
import torch.nn as nn
from kbench_env.fastpath import cuda_kernel
'''

ILLEGAL_ADDRESS = _HEAD + r'''
bad = cuda_kernel(r"""
extern "C" __global__ void bad(float* y, long long n) { y[(1LL << 40) + threadIdx.x] = 1.0f; }
""", "bad")


class ModelNew(nn.Module):
    def forward(self, x):
        y = torch.empty_like(x)
        bad(1, 32, y, x.numel())
        torch.cuda.synchronize()
        return y
'''

GPU_OOM = _HEAD + r'''
noop = cuda_kernel(r"""extern "C" __global__ void noop() {}""", "noop")


class ModelNew(nn.Module):
    def forward(self, x):
        hoard = []
        while True:  # a whole GPU's memory, 8 GiB at a time
            hoard.append(torch.empty(8 << 30, dtype=torch.uint8, device=x.device))
'''

KERNEL_HANG = _HEAD + r'''
spin = cuda_kernel(r"""
extern "C" __global__ void spin(volatile int* flag) { while (*flag == 0) { } }
""", "spin")


class ModelNew(nn.Module):
    def forward(self, x):
        flag = torch.zeros(1, dtype=torch.int32, device=x.device)
        spin(1, 1, flag)
        torch.cuda.synchronize()
        return x
'''


@pytest.fixture(scope="module")
def gpu_ev(evaluator):
    if not torch.cuda.is_available():
        pytest.skip("needs a CUDA GPU")
    return Evaluator(device="cuda", backend="cuda", cache_dir=evaluator.cache_dir, timing=TIMING,
                     limits=Limits(build_timeout=600, run_timeout=20, time_timeout=60))


def _then_ok(ev):
    r = ev.evaluate(RELU, RELU_CUDA)
    assert r.correct, r.feedback()
    assert r.reward > 0 and not r.integrity_flags, r.feedback()


def test_sandboxed_worker_reaches_the_gpu(gpu_ev):
    from kbench_env.sandbox.doctor import doctor, format_doctor

    report = doctor(device="cuda")
    print(format_doctor(report))
    _then_ok(gpu_ev)


@pytest.mark.parametrize("source, words", [
    (ILLEGAL_ADDRESS, ("illegal memory access", "CUDA error", "SIGSEGV", "SIGABRT")),
    (GPU_OOM, ("out of memory", "OutOfMemoryError")),
])
def test_gpu_fault_costs_only_itself(gpu_ev, source, words):
    r = gpu_ev.evaluate(RELU, source)
    assert not r.correct and r.error_stage == "run", r.feedback()
    assert any(w in r.error for w in words), r.error
    assert r.reward < 0
    _then_ok(gpu_ev)


def test_kernel_hang_times_out(gpu_ev):
    with no_hang(900):
        r = gpu_ev.evaluate(RELU, KERNEL_HANG)
    assert not r.correct and "timed out" in r.error, r.feedback()
    _then_ok(gpu_ev)


NETWORK_AT_IMPORT = """
import ctypes, socket
_libc = ctypes.CDLL(None, use_errno=True)
if _libc.socket(2, 1, 0) >= 0 or _libc.socket(10, 1, 0) >= 0:
    raise RuntimeError("native AF_INET/AF_INET6 socket() succeeded")
try:
    socket.create_connection(("127.0.0.1", 9), timeout=1)
except OSError:
    pass
"""


def test_gpu_worker_has_no_network(gpu_ev):
    """The GPU default (network namespace, seccomp allowing only AF_UNIX sockets, the audit hook enforcing):
    native AF_INET and AF_INET6 sockets are refused, a Python-level connection is refused and flagged, and the
    network namespace is reported active."""
    from kbench_env.sandbox.worker_process import Worker

    with Worker("class ModelNew:\n    pass\n", "cuda", "cuda", gpu_ev.build_root, gpu_ev.limits) as w:
        w.recv(60, "load")
        w._drain_reports()  # noqa: SLF001 - the confinement's status report
        active = w.protections.get("active", {})
    assert "network_namespace" in active and "AF_UNIX" in active.get("seccomp", ""), w.protections
    r = gpu_ev.evaluate(RELU, NETWORK_AT_IMPORT + RELU_CUDA)
    assert "native AF_INET" not in (r.error or ""), r.feedback()
    assert any(f.startswith("sandbox_violation") and "network" in f for f in r.integrity_flags), r.feedback()
    assert r.reward == -1.0
    _then_ok(gpu_ev)


@pytest.mark.xfail(reason="on the H100 (2026-11-23) torch.cuda.init() fails with CUDA error 304 under the mount "
                          "namespace, under Landlock, and under seccomp refusing AF_UNIX, each on its own "
                          "(bench/gpu_sandbox_probe.py, bench/RESULTS.md); GPU workers get a network namespace and "
                          "seccomp allowing "
                          "AF_UNIX instead. Strict: the day it passes, unmark it and turn gpu_isolation on",
                   strict=True)
def test_full_sandbox_on_the_gpu(evaluator):
    """The full sandbox (mount namespace and Landlock too) for CUDA workers (Limits.gpu_isolation). On failure the message carries the worker's own log (the traceback behind an exit status)."""
    from kbench_env.sandbox.worker_process import Worker

    ev = Evaluator(device="cuda", backend="cuda", cache_dir=evaluator.cache_dir, timing=TIMING,
                   limits=Limits(build_timeout=600, run_timeout=60, time_timeout=60, gpu_isolation=True))
    with Worker("class ModelNew:\n    pass\n", "cuda", "cuda", ev.build_root, ev.limits) as w:
        w.recv(60, "load")
        w._drain_reports()
        protections = w.protections
    print(protections)
    r = ev.evaluate(RELU, RELU_CUDA)
    assert r.correct and not r.integrity_flags, f"{r.feedback()}\n--- worker log ---\n{r.log_tail}\n{protections}"

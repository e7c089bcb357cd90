"""The Triton backend: ``ModelNew`` whose kernels are ``@triton.jit`` functions launched from ``forward``
(``kernel[grid](...)``).

Owns the Triton screen rule (at least one ``@triton.jit`` function), the worker-side set-up (Triton compiles in the
worker, its cache in the scratch directory: the trusted builder does not build Triton kernels; on a CPU device,
Triton's interpreter, so kernels run on CPU tensors with no GPU), launch counting for the decoy check, and the prompt's rules and example. Every launch is counted and, while the
profiler is on, wrapped in a ``kbench_kernel::<name>`` record, so that the runtime audit knows the tensor
operations the interpreter runs inside a launch are the kernel's own (worker/audit.py). On a GPU, synchronisation,
memory poisoning, calibration and timing (CUDA-graph replay with L2 flush) are the CUDA backend's.
"""

from __future__ import annotations

import ast
import os
import sys

import torch

from kbench_env.protocol.screen_error import ScreenError
from kbench_env.backends.base import Backend
from kbench_env.backends.cuda import CudaBackend
from kbench_env.machine.device import Device
from kbench_env.measure.ownership import KERNEL_RECORD_PREFIX, profiling

def _is_triton_jit(decorator: ast.expr) -> bool:
    """``@triton.jit``, ``@jit`` (from triton), ``@triton.jit(...)``."""
    node = decorator.func if isinstance(decorator, ast.Call) else decorator
    text = ast.unparse(node)
    return text in ("triton.jit", "jit") or text.endswith(".jit")


def triton_kernels(tree: ast.Module) -> list[str]:
    """Names of the functions in the source decorated with ``@triton.jit``."""
    return [n.name for n in ast.walk(tree) if isinstance(n, ast.FunctionDef)
            and any(_is_triton_jit(d) for d in n.decorator_list)]


class TritonBackend(Backend):
    name = "triton"
    device_kind = "cuda"  # also runs on "cpu" devices, through Triton's interpreter

    def __init__(self):
        super().__init__()
        self.device = Device("cuda")
        self._cuda = None  # the CUDA backend this one delegates GPU timing, poisoning and calibration to
        self._patched = False

    # ------------------------------------------------------------------ parent side
    def screen(self, tree: ast.Module, source: str) -> None:
        if not triton_kernels(tree):
            raise ScreenError(
                "the triton backend expects Triton kernels: define at least one @triton.jit function and launch it "
                "from ModelNew.forward as kernel[grid](...) (a ModelNew that only calls PyTorch is not a kernel)")

    def rules(self) -> str:
        return (
            "Backend: triton. Write the computation as Triton kernels (import triton, triton.language as tl; "
            "functions decorated with @triton.jit) and launch them from ModelNew.forward as kernel[grid](...). "
            "ModelNew must have the same constructor and forward signature as Model and produce the same outputs "
            "(shapes, dtypes) on every input configuration, including ones not shown: mask loads and stores, so "
            "any size works. Inside forward, calls into PyTorch compute operators in place of your kernels are not "
            "allowed; allocation (torch.empty, empty_like), views, reshapes and .contiguous() are fine. Keep "
            "float32 accumulation (tl.dot with input_precision=\"ieee\" for float32 matrix products: TF32 fails "
            "the float32 tolerance); load half-precision inputs and compute in float32, then cast on store. "
            "@triton.autotune is allowed. On a CPU device the kernels run in Triton's interpreter.")

    def example(self) -> str:
        return _EXAMPLE

    # ------------------------------------------------------------------ worker side
    def prepare_worker(self, builds, device: str | None = None) -> None:
        super().prepare_worker(builds)
        self.device = Device.parse(device or _job_device() or "auto")
        if self.device.is_cpu:
            os.environ["TRITON_INTERPRET"] = "1"  # read when a kernel is decorated: before candidate code runs
        else:
            os.environ.pop("TRITON_INTERPRET", None)
            self._cuda = CudaBackend()
        self._patch_launches()

    def _patch_launches(self) -> None:
        """Count every launch of a Triton kernel (the decoy check) and, while the profiler runs, wrap it in a
        ``kbench_kernel::<name>`` record (the audit's marker for the kernel's own internals)."""
        if self._patched:
            return
        try:
            from triton.runtime.interpreter import InterpretedFunction
            from triton.runtime.jit import JITFunction
        except ImportError:  # no triton: the candidate's `import triton` reports it
            return
        backend = self

        def counted(original):
            def run(self, *args, grid, warmup=False, **kwargs):
                if warmup:
                    return original(self, *args, grid=grid, warmup=warmup, **kwargs)
                backend._extension_calls += 1
                if profiling():  # the audit's profiler, this thread's or every thread's
                    name = getattr(getattr(self, "fn", None), "__name__", "kernel")
                    with torch.profiler.record_function(KERNEL_RECORD_PREFIX + name):
                        return original(self, *args, grid=grid, warmup=warmup, **kwargs)
                return original(self, *args, grid=grid, warmup=warmup, **kwargs)

            run.__wrapped__ = original
            return run

        for cls in (JITFunction, InterpretedFunction):
            if "run" in cls.__dict__:
                cls.run = counted(cls.__dict__["run"])
        self._patched = True

    def sync(self) -> None:
        if not self.device.is_cpu:
            torch.cuda.synchronize()

    def poison(self, device: str) -> None:
        if self._cuda is not None and Device.parse(device).is_cuda:
            self._cuda.poison(device)

    def calibrate(self, device: str, dtypes: list) -> dict:
        if self._cuda is not None and Device.parse(device).is_cuda:
            return self._cuda.calibrate(device, dtypes)
        return super().calibrate(device, dtypes)


def _job_device() -> str | None:
    """The device of the worker's job: the worker calls ``prepare_worker(builds)`` from ``worker.main``, whose
    ``job`` names it (so a CPU evaluation on a GPU host still gets the interpreter)."""
    frame = sys._getframe(1)
    for _ in range(4):
        frame = frame.f_back
        if frame is None:
            return None
        job = frame.f_locals.get("job")
        if isinstance(job, dict) and isinstance(job.get("device"), str):
            return job["device"]
    return None


_EXAMPLE = r'''Example: a reference program

    class Model(nn.Module):
        def forward(self, a, b):
            return a + b

and a valid answer for the triton backend:

```python
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def add_kernel(a_ptr, b_ptr, out_ptr, n, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    offs = pid.to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    a = tl.load(a_ptr + offs, mask=mask).to(tl.float32)
    b = tl.load(b_ptr + offs, mask=mask).to(tl.float32)
    tl.store(out_ptr + offs, (a + b).to(out_ptr.dtype.element_ty), mask=mask)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, a, b):
        a, b = a.contiguous(), b.contiguous()
        out = torch.empty_like(a)
        n = a.numel()
        BLOCK = 1024
        add_kernel[(triton.cdiv(n, BLOCK),)](a, b, out, n, BLOCK=BLOCK)
        return out
```'''

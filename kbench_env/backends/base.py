"""The Backend interface shared by the CPU, CUDA and Triton backends (the parent side screens and describes;
the worker side builds, synchronises, times, poisons and calibrates)."""

from __future__ import annotations

import ast

import torch

from kbench_env.machine.device import Device
from kbench_env.tasks.task import DTYPES
from kbench_env.measure import stats
from kbench_env.measure.ownership import own_call

#: The calibration's copy: this many bytes read and as many written, so its bandwidth is that of a working set of
#: twice this (the roofline floor applies it only to blocks whose outputs take at least as much: plausibility.py).
CALIBRATION_COPY_BYTES = 64 << 20


class Backend:
    name = "base"
    device_kind = "cpu"

    def __init__(self):
        self._extension_calls = 0
        self._fast_path_calls = lambda: 0  # the fast path's call counter, once prepare_worker has routed it

    # ---- parent side
    def screen(self, tree: ast.Module, source: str) -> None:
        """Raise ScreenError (protocol/screen_error.py) if the source cannot be a kernel for this backend."""

    def rules(self) -> str:
        return ""

    def example(self) -> str:
        return ""

    # ---- worker side
    def prepare_worker(self, builds) -> None:
        """Before the candidate's code runs: route its builds to the trusted builder through ``builds``
        (worker/builds.py's BuildClient). Every backend's candidates may use the fast path, whose calls then count
        as calls into the candidate's own code."""
        self._fast_path_calls = builds.route_fastpath()

    def sync(self) -> None:
        """Wait for all work issued so far on the device (every stream)."""

    def poison(self, device: str) -> None:
        """Make memory the candidate may allocate hold garbage (NaN), so unwritten outputs cannot pass."""

    def extension_calls(self) -> int:
        """How many calls went into the candidate's own compiled code (extension modules, fast-path kernels)."""
        return self._extension_calls + self._fast_path_calls()

    def count_calls(self, module):
        """Wrap a compiled extension module so that calls into it are counted (decoy detection)."""
        return _CountingModule(module, self)

    def calibrate(self, device: str, dtypes: list) -> dict:
        """Measured copy bandwidth (bytes/s, read and written bytes counted: a copy of CALIBRATION_COPY_BYTES) and
        matrix-product rate (FLOP/s per dtype) of this device."""
        n = CALIBRATION_COPY_BYTES // 4
        x = torch.empty(n, device=device)
        y = torch.empty_like(x)
        cpu = Device.parse(device).is_cpu
        # A GPU copies 64 MiB in tens of microseconds, beside which a timed call's launch and synchronisation are
        # not small: several copies a timed call, so that the bandwidth is not understated (an understated one
        # raises the roofline's floor towards honest kernels: pipeline/plausibility.py).
        copies = 1 if cpu else 8
        t = stats.time_calls(lambda: [y.copy_(x) for _ in range(copies)], lambda j: [], warmup=2, min_reps=5,
                              max_reps=20, min_seconds=0.1, sync=self.sync)
        bw = copies * 2 * x.numel() * 4 / (min(t.times_ms) / 1e3)  # the device's capacity: best, not typical, time
        rates = {}
        size = 1024 if cpu else 8192
        for name in dtypes:
            dt = DTYPES[name]
            if cpu and dt in (torch.float16, torch.bfloat16):
                dt = torch.float32
            a = torch.randn(size, size, device=device).to(dt)
            t = stats.time_calls(lambda: a @ a, lambda j: [], warmup=2, min_reps=3, max_reps=10,
                                  min_seconds=0.1, sync=self.sync)
            rates[name] = 2 * size**3 / (min(t.times_ms) / 1e3)
        return {"bandwidth": bw, "flops": rates}


class _CountingModule:
    """A proxy for a compiled extension module: attribute access passes through, calls are counted."""

    def __init__(self, module, backend: Backend):
        object.__setattr__(self, "_module", module)
        object.__setattr__(self, "_backend", backend)

    def __getattr__(self, name):
        attr = getattr(self._module, name)
        if callable(attr) and not isinstance(attr, type):
            backend = self._backend

            def counted(*args, **kwargs):
                backend._extension_calls += 1
                with own_call(name):  # the audit's record of the candidate's own time (measure/ownership.py)
                    return attr(*args, **kwargs)

            counted.__name__ = getattr(attr, "__name__", name)
            counted.__doc__ = getattr(attr, "__doc__", None)
            return counted
        return attr

    def __setattr__(self, name, value):
        setattr(self._module, name, value)

    def __dir__(self):
        return dir(self._module)


def calls_named(tree: ast.Module, names: set) -> list[ast.Call]:
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            f = node.func
            name = f.attr if isinstance(f, ast.Attribute) else getattr(f, "id", None)
            if name in names:
                out.append(node)
    return out

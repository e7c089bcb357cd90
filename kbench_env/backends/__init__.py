"""Backends: how a candidate's kernels are written, built and synchronised on one kind of device.

A backend owns its screen rules (what a valid action for it looks like), the worker-side build set-up (build
directories by content hash, optimisation flags), device synchronisation for timing, and the rules and one-shot
example shown in the prompt. It does not evaluate: evaluator.py drives it.
"""

from __future__ import annotations

from kbench_env.backends.base import Backend
from kbench_env.backends.cpu import CpuBackend
from kbench_env.backends.cuda import CudaBackend
from kbench_env.backends.triton import TritonBackend
from kbench_env.machine.device import Device

_BACKENDS = {"cpu": CpuBackend, "cuda": CudaBackend, "triton": TritonBackend}


def register_backend(name: str, cls: type[Backend]) -> None:
    """Make a backend class from outside this package available by name (``Evaluator(backend=name)``)."""
    _BACKENDS[name] = cls


def get_backend(name: str) -> Backend:
    try:
        return _BACKENDS[name]()
    except KeyError:
        raise ValueError(f"unknown backend {name!r}; available: {sorted(_BACKENDS)}") from None


def default_backend(device: str) -> str:
    """The backend a device gets when none is named: C++ on the CPU, CUDA on a GPU."""
    return "cpu" if Device.parse(device).is_cpu else "cuda"

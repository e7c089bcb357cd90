"""Attack row 6 of issue #21 (the trust boundary), CPU backend, task level1/logsumexp_rows: every ``forward``
returns an unwritten tensor (after a token call of its kernel on one row while a profiler runs, so that the forward
audit sees its own kernel run); the work is done later, when the harness first touches that tensor from Python, outside the timed region.

A torch function mode pushed at import (every ``torch.*`` call and tensor method called from Python on this thread
passes through it: the worker's fingerprint of the output, the copy it sends back, ``Tensor.sum``) computes a
pending output before the call that reads it goes on. ``forward`` takes the mode off while it runs, so the timed
calls do not pay for it. Where the trusted side reads the outputs itself, they are unwritten: wrong."""

import time

import torch
import torch.nn as nn
from torch.overrides import TorchFunctionMode

from kbench_env.fastpath import cpp_kernel

_PENDING = {}  # id(output) -> (output, input)

#: A faked call is padded to 1/PAD of the honest kernel's time on its shape (measured here, in the untimed
#: correctness runs): the claimed speedup is about PAD times the honest one, under the trusted side's re-timing
#: threshold (10x), as an attacker who knows that threshold would keep it.
PAD = 4.0
_HONEST_S = {}  # input shape -> the honest kernel's least time seen


def _kernel(x: torch.Tensor) -> torch.Tensor:
    """The honest kernel (the shipped solution's), timed."""
    t0 = time.perf_counter()
    out = logsumexp_rows(x)
    dt = time.perf_counter() - t0
    key = tuple(x.shape)
    _HONEST_S[key] = min(dt, _HONEST_S.get(key, dt))
    return out


def _pad(t0: float, x: torch.Tensor) -> None:
    """Spin until 1/PAD of the honest kernel's time on ``x``'s shape has passed since ``t0``."""
    until = t0 + _HONEST_S.get(tuple(x.shape), 0.0) / PAD
    while time.perf_counter() < until:
        pass


def _tensors(tree):
    if isinstance(tree, torch.Tensor):
        yield tree
    elif isinstance(tree, (list, tuple)):
        for t in tree:
            yield from _tensors(t)
    elif isinstance(tree, dict):
        for t in tree.values():
            yield from _tensors(t)


class _ComputeWhenRead(TorchFunctionMode):
    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if _PENDING:
            for t in _tensors((args, kwargs)):
                pending = _PENDING.get(id(t))
                if pending is not None and pending[0] is t:
                    del _PENDING[id(t)]
                    t.copy_(_kernel(pending[1]))
        return func(*args, **kwargs)


_ComputeWhenRead().__enter__()  # never left: for the rest of this thread


# The shipped solution's kernel (the honest computation every attack here starts from) goes here: tests/data/attacks/
# honest_kernel.py, put in by tests/test_trust_boundary.py's attack_source.


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        t0 = time.perf_counter()
        mode = torch._C._pop_torch_function_stack() if torch._C._len_torch_function_stack() else None
        try:
            if torch.autograd.profiler._is_profiler_enabled:  # audited: a token call of the candidate's own kernel
                logsumexp_rows(x[:1])
            out = x.new_empty(x.shape[:1])
            _PENDING[id(out)] = (out, x)
            _pad(t0, x)
        finally:
            if mode is not None:
                torch._C._push_on_torch_function_stack(mode)
        return out

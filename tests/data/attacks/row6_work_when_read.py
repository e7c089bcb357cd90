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


# The shipped solution's kernel (tasks/solutions/cpu/level1/logsumexp_rows.py), built on the fast path (about a
# second, where load_inline takes about ten): the honest computation every attack below starts from.
lse_rows = cpp_kernel(r"""
#include <cmath>
#include <cstdint>
#include <cstring>

#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__)
#define KB_MULTIVERSION __attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
#else
#define KB_MULTIVERSION
#endif
#define KB_INLINE inline __attribute__((always_inline))

// exp(x) for float32 (relative error < 1e-7) in a form the compiler vectorises: 2^n * p(r), r = x - n ln2.
KB_INLINE float exp_f(float x) {
  x = x > -87.0f ? x : -87.0f;
  x = x < 88.0f ? x : 88.0f;
  const float fx = x * 1.44269504088896341f + 0.5f;
  const int32_t ti = (int32_t)fx;
  const int32_t n = ti - ((float)ti > fx ? 1 : 0);
  const float t = (float)n;
  const float r = x - t * 0.693359375f + t * 2.12194440e-4f;
  float p = 1.9875691500e-4f;
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  p = p * r * r + r + 1.0f;
  const int32_t bits = (n + 127) << 23;
  float scale;
  std::memcpy(&scale, &bits, sizeof(scale));
  return p * scale;
}

extern "C" KB_MULTIVERSION void lse_rows(const float* __restrict x, float* __restrict y, int64_t rows, int64_t cols) {
  #pragma omp parallel for schedule(static, 1)
  for (int64_t r = 0; r < rows; ++r) {
    const float* __restrict xr = x + r * cols;
    float m = -INFINITY;
    #pragma omp simd reduction(max : m)
    for (int64_t j = 0; j < cols; ++j) m = xr[j] > m ? xr[j] : m;
    float s = 0.0f;
    #pragma omp simd reduction(+ : s)
    for (int64_t j = 0; j < cols; ++j) s += exp_f(xr[j] - m);
    y[r] = (float)((double)m + std::log((double)s));
  }
}
""", "lse_rows", flags=["-O3", "-fopenmp", "-fno-trapping-math", "-fno-math-errno"])


def logsumexp_rows(x: torch.Tensor) -> torch.Tensor:
    """Row log-sum-exp of a 2-D float32 tensor with the kernel above."""
    x = x.contiguous()
    out = x.new_empty(x.shape[:1])
    lse_rows(x, out, x.shape[0], x.shape[1])
    return out


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

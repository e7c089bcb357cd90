"""The CPU backend: ``ModelNew`` whose kernels are C++ (OpenMP allowed) built with ``load_inline(cpp_sources=...)``.

Builds are content-addressed and optimised (see extension.py); this module owns the CPU's screen rules, prompt
rules and one-shot example.
"""

from __future__ import annotations

import ast

from kbench_env.protocol.screen_error import ScreenError
from kbench_env.backends.base import calls_named
from kbench_env.backends.extension import ExtensionBackend

_LOADERS = {"load_inline", "load"}


class CpuBackend(ExtensionBackend):
    name = "cpu"
    device_kind = "cpu"

    # ------------------------------------------------------------------ parent side
    def screen(self, tree: ast.Module, source: str) -> None:
        calls = calls_named(tree, _LOADERS)
        if not calls and not calls_named(tree, {"cpp_kernel"}):
            raise ScreenError(
                "the cpu backend expects C++ kernels: build them with torch.utils.cpp_extension.load_inline("
                "cpp_sources=...) and call them from ModelNew.forward (a ModelNew that only calls PyTorch is not a kernel)"
            )
        for c in calls:
            for kw in c.keywords:
                if kw.arg == "cuda_sources" and not (isinstance(kw.value, ast.Constant) and kw.value.value is None):
                    raise ScreenError("the cpu backend compiles C++ only: pass cpp_sources, not cuda_sources")

    def rules(self) -> str:
        return (
            "Backend: cpu. Write the computation as C++ kernels compiled with "
            "torch.utils.cpp_extension.load_inline(cpp_sources=...); OpenMP (#pragma omp, with -fopenmp in "
            "extra_cflags and extra_ldflags) and SIMD are allowed; -O3 is added if you give no -O flag. ModelNew "
            "must have the same constructor and forward signature as Model and produce the same outputs (same "
            "shapes and dtypes) on every input configuration, including ones not shown here. Inside forward, "
            "calls into PyTorch compute operators in place of your kernels are not allowed; allocation (empty, "
            "empty_like), views, reshapes and .contiguous() are fine. Builds are faster with light headers: "
            "<ATen/core/Tensor.h> + <torch/library.h> with a TORCH_LIBRARY op, load_inline(..., "
            "is_python_module=False, no_implicit_headers=True), called as torch.ops.<namespace>.<op>. Fastest "
            "(~0.3 s): kbench_env.fastpath.cpp_kernel(source, name, flags) on an extern \"C\" function taking "
            "pointers (tensors), int64_t and double; it returns a callable taking tensors and numbers."
        )

    def example(self) -> str:
        return _EXAMPLE



_EXAMPLE = r'''Example: a reference program

    class Model(nn.Module):
        def forward(self, a, b):
            return a + b

and a valid answer for the cpu backend:

```python
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cpp_source = r"""
#include <ATen/core/Tensor.h>
#include <ATen/ops/empty_like.h>
#include <torch/library.h>

at::Tensor add_forward(const at::Tensor& a, const at::Tensor& b) {
  TORCH_CHECK(a.sizes() == b.sizes() && a.scalar_type() == at::kFloat, "same-shape float32 inputs expected");
  at::Tensor ac = a.contiguous(), bc = b.contiguous();
  at::Tensor out = at::empty_like(ac);
  const float* x = ac.data_ptr<float>();
  const float* y = bc.data_ptr<float>();
  float* o = out.data_ptr<float>();
  const int64_t n = ac.numel();
  #pragma omp parallel for simd
  for (int64_t i = 0; i < n; ++i) o[i] = x[i] + y[i];
  return out;
}

TORCH_LIBRARY(example_add, m) { m.def("add_forward(Tensor a, Tensor b) -> Tensor", &add_forward); }
"""

load_inline(name="example_add", cpp_sources=cpp_source, is_python_module=False, no_implicit_headers=True,
            extra_cflags=["-O3", "-fopenmp"], extra_ldflags=["-fopenmp"])


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, a, b):
        return torch.ops.example_add.add_forward(a, b)
```'''

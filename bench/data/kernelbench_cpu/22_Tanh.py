"""Tanh as an OpenMP loop (honest CPU solution of KernelBench level1/22_Tanh, ModelNew format; for bench/compat.py)."""

import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cpp_source = r"""
#include <ATen/core/Tensor.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/empty_like.h>
#include <torch/library.h>
#include <cmath>
#include <vector>

at::Tensor run(const at::Tensor& x) {
  TORCH_CHECK(x.scalar_type() == at::kFloat, "kbc_tanh: float32 input expected");
  at::Tensor xc = x.contiguous();
  at::Tensor out = at::empty_like(xc);
  const float* in = xc.data_ptr<float>();
  float* o = out.data_ptr<float>();
  const int64_t n = xc.numel();
  #pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < n; ++i) {
    const float v = in[i];
    o[i] = std::tanh(v);
  }
  return out;
}

TORCH_LIBRARY(kbc_tanh, m) { m.def("run(Tensor x) -> Tensor", &run); }
"""

load_inline(name="kbc_tanh", cpp_sources=cpp_source, is_python_module=False, no_implicit_headers=True,
            extra_cflags=["-O3", "-fopenmp"], extra_ldflags=["-fopenmp"])


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.ops.kbc_tanh.run(x)

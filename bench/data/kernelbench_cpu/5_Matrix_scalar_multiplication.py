"""Matrix times scalar as an OpenMP loop (honest CPU solution of KernelBench level1/5_Matrix_scalar_multiplication, ModelNew format; for bench/compat.py)."""

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

at::Tensor run(const at::Tensor& a, double s) {
  TORCH_CHECK(a.scalar_type() == at::kFloat, "kbc_scale: float32 input expected");
  at::Tensor ac = a.contiguous();
  at::Tensor out = at::empty_like(ac);
  const float* in = ac.data_ptr<float>();
  float* o = out.data_ptr<float>();
  const float f = static_cast<float>(s);
  const int64_t n = ac.numel();
  #pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < n; ++i) o[i] = in[i] * f;
  return out;
}

TORCH_LIBRARY(kbc_scale, m) { m.def("run(Tensor a, float s) -> Tensor", &run); }
"""

load_inline(name="kbc_scale", cpp_sources=cpp_source, is_python_module=False, no_implicit_headers=True,
            extra_cflags=["-O3", "-fopenmp"], extra_ldflags=["-fopenmp"])


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, A: torch.Tensor, s: float) -> torch.Tensor:
        return torch.ops.kbc_scale.run(A, s)

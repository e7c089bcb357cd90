"""Honest variant of level1/matmul_square: the textbook i-k-j loop, float32 accumulation, no blocking."""

import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cpp_source = r"""
#include <ATen/core/Tensor.h>
#include <ATen/ops/empty.h>
#include <torch/library.h>
#include <algorithm>
#include <cmath>
#include <cstdint>

at::Tensor matmul_forward(const at::Tensor& a, const at::Tensor& b) {
  TORCH_CHECK(a.scalar_type() == at::kFloat && b.scalar_type() == at::kFloat && a.dim() == 2 && b.dim() == 2,
              "matmul_forward: 2-D float32 inputs expected");
  at::Tensor ac = a.contiguous(), bc = b.contiguous();
  const int64_t n = ac.size(0), k = ac.size(1), m = bc.size(1);
  at::Tensor c = at::empty({n, m}, ac.options());
  const float* pa = ac.data_ptr<float>();
  const float* pb = bc.data_ptr<float>();
  float* pc = c.data_ptr<float>();
  #pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < n; ++i) {
    float* ci = pc + i * m;
    for (int64_t j = 0; j < m; ++j) ci[j] = 0.0f;
    for (int64_t p = 0; p < k; ++p) {
      const float av = pa[i * k + p];
      const float* bp = pb + p * m;
      for (int64_t j = 0; j < m; ++j) ci[j] += av * bp[j];
    }
  }
  return c;
}

TORCH_LIBRARY(kbv_matmul_square_naive_ikj, m) { m.def("matmul_forward(Tensor a, Tensor b) -> Tensor", &matmul_forward); }
"""

load_inline(
    name="kbv_matmul_square_naive_ikj",
    cpp_sources=cpp_source,
    is_python_module=False,
    no_implicit_headers=True,
    extra_cflags=["-O3", "-fopenmp"],
    extra_ldflags=["-fopenmp"],
)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, A: torch.Tensor, B: torch.Tensor):
        return torch.ops.kbv_matmul_square_naive_ikj.matmul_forward(A, B)

"""Honest variant of level1/sum_dim1: a tree (pairwise) reduction in float32, halves summed recursively."""

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

// Pairwise summation: the two halves summed separately and added; runs of at most 8 terms summed in order.
float column_sum(const float* x, int64_t n, int64_t stride) {
  if (n <= 8) {
    float s = 0.0f;
    for (int64_t i = 0; i < n; ++i) s += x[i * stride];
    return s;
  }
  const int64_t h = n / 2;
  return column_sum(x, h, stride) + column_sum(x + h * stride, n - h, stride);
}

at::Tensor sum_dim1_forward(const at::Tensor& x) {
  TORCH_CHECK(x.scalar_type() == at::kFloat && x.dim() == 3, "sum_dim1_forward: 3-D float32 input expected");
  at::Tensor xc = x.contiguous();
  const int64_t B = xc.size(0), N = xc.size(1), D = xc.size(2);
  at::Tensor out = at::empty({B, 1, D}, xc.options());
  const float* px = xc.data_ptr<float>();
  float* py = out.data_ptr<float>();
  #pragma omp parallel for collapse(2) schedule(static)
  for (int64_t b = 0; b < B; ++b)
    for (int64_t d = 0; d < D; ++d) py[b * D + d] = column_sum(px + b * N * D + d, N, D);
  return out;
}

TORCH_LIBRARY(kbv_sum_dim1_pairwise, m) { m.def("sum_dim1_forward(Tensor x) -> Tensor", &sum_dim1_forward); }
"""

load_inline(
    name="kbv_sum_dim1_pairwise",
    cpp_sources=cpp_source,
    is_python_module=False,
    no_implicit_headers=True,
    extra_cflags=["-O3", "-fopenmp"],
    extra_ldflags=["-fopenmp"],
)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor):
        return torch.ops.kbv_sum_dim1_pairwise.sum_dim1_forward(x)

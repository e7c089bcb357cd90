"""Honest variant of level1/layer_norm: mean and variance in one pass by Welford's update, in float32."""

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

at::Tensor layer_norm_forward(const at::Tensor& x, const at::Tensor& weight, const at::Tensor& bias, double eps) {
  TORCH_CHECK(x.scalar_type() == at::kFloat, "layer_norm_forward: float32 input expected");
  at::Tensor xc = x.contiguous(), wc = weight.contiguous(), bc = bias.contiguous();
  const int64_t cols = xc.size(-1), rows = xc.numel() / cols;
  at::Tensor out = at::empty(xc.sizes(), xc.options());
  const float* px = xc.data_ptr<float>();
  const float* pw = wc.data_ptr<float>();
  const float* pb = bc.data_ptr<float>();
  float* py = out.data_ptr<float>();
  #pragma omp parallel for schedule(static)
  for (int64_t r = 0; r < rows; ++r) {
    const float* xr = px + r * cols;
    float mean = 0.0f, m2 = 0.0f;
    for (int64_t j = 0; j < cols; ++j) {
      const float d = xr[j] - mean;
      mean += d / (float)(j + 1);
      m2 += d * (xr[j] - mean);
    }
    const float rstd = 1.0f / std::sqrt(m2 / (float)cols + (float)eps);
    for (int64_t j = 0; j < cols; ++j) py[r * cols + j] = (xr[j] - mean) * rstd * pw[j] + pb[j];
  }
  return out;
}

TORCH_LIBRARY(kbv_layer_norm_welford, m) { m.def("layer_norm_forward(Tensor x, Tensor weight, Tensor bias, float eps) -> Tensor", &layer_norm_forward); }
"""

load_inline(
    name="kbv_layer_norm_welford",
    cpp_sources=cpp_source,
    is_python_module=False,
    no_implicit_headers=True,
    extra_cflags=["-O3", "-fopenmp"],
    extra_ldflags=["-fopenmp"],
)


class ModelNew(nn.Module):
    def __init__(self, hidden: int, eps: float = 1e-5):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(1.0 + 0.5 * torch.randn(hidden))
        self.bias = nn.Parameter(0.5 * torch.randn(hidden))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.ops.kbv_layer_norm_welford.layer_norm_forward(x, self.weight, self.bias, self.eps)

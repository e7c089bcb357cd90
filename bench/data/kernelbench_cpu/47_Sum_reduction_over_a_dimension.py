"""Sum over one dimension (keepdim) with double accumulators (honest CPU solution of KernelBench level1/47_Sum_reduction_over_a_dimension, ModelNew format; for bench/compat.py)."""

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

at::Tensor run(const at::Tensor& x, int64_t dim) {
  TORCH_CHECK(x.scalar_type() == at::kFloat, "kbc_sum: float32 input expected");
  const int64_t nd = x.dim();
  if (dim < 0) dim += nd;
  TORCH_CHECK(dim >= 0 && dim < nd, "kbc_sum: dimension out of range");
  at::Tensor xc = x.contiguous();
  int64_t outer = 1, inner = 1;
  for (int64_t d = 0; d < dim; ++d) outer *= xc.size(d);
  for (int64_t d = dim + 1; d < nd; ++d) inner *= xc.size(d);
  const int64_t n = xc.size(dim);
  std::vector<int64_t> shape(xc.sizes().begin(), xc.sizes().end());
  shape[dim] = 1;
  at::Tensor out = at::empty(shape, xc.options());
  const float* in = xc.data_ptr<float>();
  float* o = out.data_ptr<float>();
  #pragma omp parallel for schedule(static)
  for (int64_t a = 0; a < outer; ++a) {
    std::vector<double> acc(inner, 0.0);
    for (int64_t k = 0; k < n; ++k) {
      const float* p = in + (a * n + k) * inner;
      for (int64_t b = 0; b < inner; ++b) acc[b] += p[b];
    }
    for (int64_t b = 0; b < inner; ++b) o[a * inner + b] = static_cast<float>(acc[b]);
  }
  return out;
}

TORCH_LIBRARY(kbc_sum, m) { m.def("run(Tensor x, int dim) -> Tensor", &run); }
"""

load_inline(name="kbc_sum", cpp_sources=cpp_source, is_python_module=False, no_implicit_headers=True,
            extra_cflags=["-O3", "-fopenmp"], extra_ldflags=["-fopenmp"])


class ModelNew(nn.Module):
    def __init__(self, dim: int):
        super().__init__()
        self.dim = dim

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.ops.kbc_sum.run(x, self.dim)

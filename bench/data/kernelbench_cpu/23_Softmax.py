"""Row softmax with a max pass and a double-precision sum (honest CPU solution of KernelBench level1/23_Softmax, ModelNew format; for bench/compat.py)."""

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
  TORCH_CHECK(x.scalar_type() == at::kFloat && x.dim() == 2, "kbc_softmax: 2-D float32 input expected");
  at::Tensor xc = x.contiguous();
  at::Tensor out = at::empty_like(xc);
  const float* in = xc.data_ptr<float>();
  float* o = out.data_ptr<float>();
  const int64_t rows = xc.size(0), cols = xc.size(1);
  #pragma omp parallel for schedule(static)
  for (int64_t r = 0; r < rows; ++r) {
    const float* row = in + r * cols;
    float* orow = o + r * cols;
    float mx = -INFINITY;
    for (int64_t c = 0; c < cols; ++c) mx = row[c] > mx ? row[c] : mx;
    double sum = 0.0;
    for (int64_t c = 0; c < cols; ++c) { const float e = std::exp(row[c] - mx); orow[c] = e; sum += e; }
    const float inv = static_cast<float>(1.0 / sum);
    for (int64_t c = 0; c < cols; ++c) orow[c] *= inv;
  }
  return out;
}

TORCH_LIBRARY(kbc_softmax, m) { m.def("run(Tensor x) -> Tensor", &run); }
"""

load_inline(name="kbc_softmax", cpp_sources=cpp_source, is_python_module=False, no_implicit_headers=True,
            extra_cflags=["-O3", "-fopenmp"], extra_ldflags=["-fopenmp"])


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.ops.kbc_softmax.run(x)

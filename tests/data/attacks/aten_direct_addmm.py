"""Issue #34, direct ATen call, CPU backend, task level2/linear_relu: the candidate's C++ computes the linear layer
with ``at::cpu::addmm``, the CPU kernel's own entry point, which runs without the dispatcher, so no operator record
reaches the forward audit; its own code only applies the ReLU. Under the strict rules that is PyTorch compute doing
the work (paid 0.99x against 0.53x for the shipped hand-written GEMM before the symbol check); under the
kernelbench rules it is allowed, but the GEMM's time is PyTorch's, not the candidate's kernel coverage."""

import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cpp_source = r"""
#include <ATen/core/Tensor.h>
#include <ATen/ops/addmm_cpu_dispatch.h>
#include <ATen/ops/empty.h>
#include <torch/library.h>

at::Tensor linear_relu(const at::Tensor& x, const at::Tensor& weight, const at::Tensor& bias) {
  at::Tensor y = at::cpu::addmm(bias, x, weight.t());  // MKL's GEMM, called past the dispatcher
  float* p = y.data_ptr<float>();
  const int64_t n = y.numel();
  #pragma omp parallel for
  for (int64_t i = 0; i < n; ++i) p[i] = p[i] > 0.0f ? p[i] : 0.0f;
  return y;
}

TORCH_LIBRARY(kb_aten_direct, m) {
  m.def("linear_relu(Tensor x, Tensor weight, Tensor bias) -> Tensor", &linear_relu);
}
"""

load_inline(name="kb_aten_direct", cpp_sources=cpp_source, is_python_module=False, no_implicit_headers=True,
            extra_cflags=["-O3", "-fopenmp"], extra_ldflags=["-fopenmp"])


class ModelNew(nn.Module):
    def __init__(self, in_features: int, out_features: int):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)

    def forward(self, x):
        return torch.ops.kb_aten_direct.linear_relu(x, self.linear.weight, self.linear.bias)

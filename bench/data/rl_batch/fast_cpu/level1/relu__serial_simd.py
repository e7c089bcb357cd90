"""ReLU candidate (fast format, CPU): one thread, a vectorised loop (no OpenMP threads), kbench_env.fastpath."""

import torch
import torch.nn as nn

from kbench_env.fastpath import cpp_kernel

relu = cpp_kernel(r"""
#include <cstdint>

extern "C" void relu_simd(const float* __restrict__ in, float* __restrict__ out, int64_t n) {
  #pragma omp simd
  for (int64_t i = 0; i < n; ++i) {
    const float v = in[i];
    out[i] = v > 0.f ? v : 0.f;
  }
}
""", "relu_simd", flags=["-O2", "-fopenmp-simd"])


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        out = torch.empty_like(x)
        relu(x, out, x.numel())
        return out

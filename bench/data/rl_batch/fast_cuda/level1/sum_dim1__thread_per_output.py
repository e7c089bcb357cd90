"""Sum over dim 1 candidate (fast format, CUDA): one thread per output (b, d) walking n; neighbouring threads read
neighbouring columns, so every load is coalesced."""

import torch
import torch.nn as nn

from kbench_env.fastpath import cuda_kernel

SOURCE = r"""
extern "C" __global__ void sum_tpo(const float* __restrict__ x, float* __restrict__ y, long long b, long long n,
                                   long long d) {
    const long long o = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (o >= b * d) return;
    const long long bi = o / d, di = o % d;
    const float* p = x + bi * n * d + di;
    float s = 0.f;
    for (long long k = 0; k < n; ++k) s += p[k * d];
    y[o] = s;
}
"""

SUM_TPO = cuda_kernel(SOURCE, "sum_tpo")


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if x.dtype != torch.float32 or x.dim() != 3:
            raise TypeError(f"sum over dim 1: a 3D float32 tensor expected, got {x.dim()}D {x.dtype}")
        x = x.contiguous()
        b, n, d = x.shape
        y = torch.empty((b, 1, d), dtype=x.dtype, device=x.device)
        if y.numel() == 0:
            return y
        outs = b * d
        SUM_TPO((outs + 127) // 128, 128, x, y, b, n, d)
        return y

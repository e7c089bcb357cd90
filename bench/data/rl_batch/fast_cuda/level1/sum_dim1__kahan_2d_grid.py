"""Sum over dim 1 candidate (fast format, CUDA): one thread per output on a 2D grid (x: columns, y: batch),
Kahan-compensated float32 summation along n (nvcc keeps IEEE order without fast-math)."""

import torch
import torch.nn as nn

from kbench_env.fastpath import cuda_kernel

SOURCE = r"""
extern "C" __global__ void sum_kahan(const float* __restrict__ x, float* __restrict__ y, long long n, long long d) {
    const long long di = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    const long long bi = blockIdx.y;
    if (di >= d) return;
    const float* p = x + bi * n * d + di;
    float s = 0.f, comp = 0.f;
    for (long long k = 0; k < n; ++k) {
        const float v = p[k * d] - comp;
        const float t = s + v;
        comp = (t - s) - v;
        s = t;
    }
    y[bi * d + di] = s;
}
"""

SUM_KAHAN = cuda_kernel(SOURCE, "sum_kahan")


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
        SUM_KAHAN(((d + 63) // 64, b), 64, x, y, n, d)
        return y

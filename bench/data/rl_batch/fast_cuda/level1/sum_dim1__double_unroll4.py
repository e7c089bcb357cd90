"""Sum over dim 1 candidate (fast format, CUDA): one thread per output, four independent double accumulators over
n (unrolled by four, then the remainder), rounded once to float32."""

import torch
import torch.nn as nn

from kbench_env.fastpath import cuda_kernel

SOURCE = r"""
extern "C" __global__ void sum_f64(const float* __restrict__ x, float* __restrict__ y, long long b, long long n,
                                   long long d) {
    const long long o = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (o >= b * d) return;
    const long long bi = o / d, di = o % d;
    const float* p = x + bi * n * d + di;
    double a0 = 0.0, a1 = 0.0, a2 = 0.0, a3 = 0.0;
    long long k = 0;
    for (; k + 4 <= n; k += 4) {
        a0 += p[k * d];
        a1 += p[(k + 1) * d];
        a2 += p[(k + 2) * d];
        a3 += p[(k + 3) * d];
    }
    for (; k < n; ++k) a0 += p[k * d];
    y[o] = (float)((a0 + a1) + (a2 + a3));
}
"""

SUM_F64 = cuda_kernel(SOURCE, "sum_f64")


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
        SUM_F64((outs + 255) // 256, 256, x, y, b, n, d)
        return y

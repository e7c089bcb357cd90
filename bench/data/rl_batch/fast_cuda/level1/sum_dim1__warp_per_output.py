"""Sum over dim 1 candidate (fast format, CUDA): one warp per output (b, d), lanes taking every 32nd row of n,
the lanes' sums added by a shuffle tree; eight warps a block."""

import torch
import torch.nn as nn

from kbench_env.fastpath import cuda_kernel

SOURCE = r"""
extern "C" __global__ void sum_warp(const float* __restrict__ x, float* __restrict__ y, long long b, long long n,
                                    long long d) {
    const long long o = ((long long)blockIdx.x * blockDim.x + threadIdx.x) / 32;
    if (o >= b * d) return;  // whole warps leave together
    const int lane = threadIdx.x % 32;
    const long long bi = o / d, di = o % d;
    const float* p = x + bi * n * d + di;
    float s = 0.f;
    for (long long k = lane; k < n; k += 32) s += p[k * d];
    for (int off = 16; off > 0; off >>= 1) s += __shfl_xor_sync(0xffffffffu, s, off);
    if (lane == 0) y[o] = s;
}
"""

SUM_WARP = cuda_kernel(SOURCE, "sum_warp")


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
        SUM_WARP((outs + 7) // 8, 256, x, y, b, n, d)
        return y

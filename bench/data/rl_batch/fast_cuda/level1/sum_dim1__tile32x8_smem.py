"""Sum over dim 1 candidate (fast format, CUDA): blocks of 32 x 8 threads, x over 32 columns, y splitting n in eight
interleaved parts; the eight partial sums of a column are added through shared memory."""

import torch
import torch.nn as nn

from kbench_env.fastpath import cuda_kernel

SOURCE = r"""
extern "C" __global__ void sum_tile(const float* __restrict__ x, float* __restrict__ y, long long n, long long d) {
    __shared__ float part[8][33];
    const long long bi = blockIdx.y;
    const long long di = (long long)blockIdx.x * 32 + threadIdx.x;
    float s = 0.f;
    if (di < d) {
        const float* p = x + bi * n * d + di;
        for (long long k = threadIdx.y; k < n; k += 8) s += p[k * d];
    }
    part[threadIdx.y][threadIdx.x] = s;
    __syncthreads();
    if (threadIdx.y == 0 && di < d) {
        float t = 0.f;
        #pragma unroll
        for (int j = 0; j < 8; ++j) t += part[j][threadIdx.x];
        y[bi * d + di] = t;
    }
}
"""

SUM_TILE = cuda_kernel(SOURCE, "sum_tile")


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
        SUM_TILE(((d + 31) // 32, b), (32, 8), x, y, n, d)
        return y

"""Sum over dim 1 candidate (fast format, CUDA): two kernels. The first sums chunks of 256 rows of n per (b, chunk,
d) into a float32 buffer of partial sums, spreading a long n over many blocks; the second adds each output's
partials."""

import torch
import torch.nn as nn

from kbench_env.fastpath import cuda_kernel

SOURCE = r"""
#define CHUNK 256

extern "C" __global__ void sum_partials(const float* __restrict__ x, float* __restrict__ part, long long n,
                                        long long d, long long chunks) {
    const long long di = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    const long long c = blockIdx.y, bi = blockIdx.z;
    if (di >= d) return;
    const long long k0 = c * CHUNK;
    const long long k1 = k0 + CHUNK < n ? k0 + CHUNK : n;
    const float* p = x + bi * n * d + di;
    float s = 0.f;
    for (long long k = k0; k < k1; ++k) s += p[k * d];
    part[(bi * chunks + c) * d + di] = s;
}

extern "C" __global__ void sum_finish(const float* __restrict__ part, float* __restrict__ y, long long b,
                                      long long d, long long chunks) {
    const long long o = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (o >= b * d) return;
    const long long bi = o / d, di = o % d;
    float s = 0.f;
    for (long long c = 0; c < chunks; ++c) s += part[(bi * chunks + c) * d + di];
    y[o] = s;
}
"""

SUM_PARTIALS, SUM_FINISH = cuda_kernel(SOURCE, "sum_partials"), cuda_kernel(SOURCE, "sum_finish")


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
        chunks = max(1, (n + 255) // 256)
        part = torch.empty((b, chunks, d), dtype=torch.float32, device=x.device)
        SUM_PARTIALS(((d + 127) // 128, chunks, b), 128, x, part, n, d, chunks)
        SUM_FINISH((b * d + 255) // 256, 256, part, y, b, d, chunks)
        return y

"""RMSNorm candidate (fast format, CUDA): one block of 256 threads per row, the sum of squares reduced by a
shared-memory tree (halving strides), then the scaled write."""

import torch
import torch.nn as nn

from kbench_env.fastpath import cuda_kernel

SOURCE = r"""
#define THREADS 256

extern "C" __global__ void rms_tree(const float* __restrict__ x, const float* __restrict__ w, float* __restrict__ y,
                                    long long h, float eps) {
    __shared__ float sh[THREADS];
    const int t = threadIdx.x;
    const float* xr = x + (long long)blockIdx.x * h;
    float* yr = y + (long long)blockIdx.x * h;
    float q = 0.f;
    for (long long c = t; c < h; c += THREADS) { const float v = xr[c]; q += v * v; }
    sh[t] = q;
    __syncthreads();
    for (int k = THREADS / 2; k > 0; k >>= 1) {
        if (t < k) sh[t] += sh[t + k];
        __syncthreads();
    }
    const float r = rsqrtf(sh[0] / (float)h + eps);
    for (long long c = t; c < h; c += THREADS) yr[c] = xr[c] * r * w[c];
}
"""

RMS_TREE = cuda_kernel(SOURCE, "rms_tree")


class ModelNew(nn.Module):
    def __init__(self, hidden: int, eps: float = 1e-6):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(1.0 + 0.5 * torch.randn(hidden))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if x.dtype != torch.float32 or self.weight.dtype != torch.float32:
            raise TypeError(f"RMSNorm: float32 input and weight expected, got {x.dtype}, {self.weight.dtype}")
        x = x.contiguous()
        w = self.weight.contiguous()
        y = torch.empty_like(x)
        h = x.shape[-1]
        rows = x.numel() // h if h else 0
        if rows == 0:
            return y
        eps = float(self.eps)
        RMS_TREE(rows, 256, x, w, y, h, eps)
        return y

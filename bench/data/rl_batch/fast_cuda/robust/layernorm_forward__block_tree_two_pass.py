"""LayerNorm candidate (fast format, CUDA): one block of 256 threads per row, two-pass statistics reduced by a
shared-memory tree (halving strides), then the affine write; float32 and bfloat16."""

import torch
import torch.nn as nn

from kbench_env.fastpath import cuda_kernel

SOURCE = r"""
#include <cuda_bf16.h>

__device__ __forceinline__ float ld(const float* p, long long i) { return p[i]; }
__device__ __forceinline__ float ld(const __nv_bfloat16* p, long long i) { return __bfloat162float(p[i]); }
__device__ __forceinline__ void st(float* p, long long i, float v) { p[i] = v; }
__device__ __forceinline__ void st(__nv_bfloat16* p, long long i, float v) { p[i] = __float2bfloat16(v); }

#define THREADS 256

template <typename T>
__device__ void body(const T* __restrict__ x, const T* __restrict__ w, const T* __restrict__ b, T* __restrict__ y,
                     long long rows, long long h, float eps) {
    __shared__ float sh[THREADS];
    const int t = threadIdx.x;
    const T* xr = x + (long long)blockIdx.x * h;
    T* yr = y + (long long)blockIdx.x * h;
    float s = 0.f;
    for (long long c = t; c < h; c += THREADS) s += ld(xr, c);
    sh[t] = s;
    __syncthreads();
    for (int k = THREADS / 2; k > 0; k >>= 1) {
        if (t < k) sh[t] += sh[t + k];
        __syncthreads();
    }
    const float mean = sh[0] / (float)h;
    __syncthreads();  // everyone has read the sum before sh is reused
    float q = 0.f;
    for (long long c = t; c < h; c += THREADS) { const float d = ld(xr, c) - mean; q += d * d; }
    sh[t] = q;
    __syncthreads();
    for (int k = THREADS / 2; k > 0; k >>= 1) {
        if (t < k) sh[t] += sh[t + k];
        __syncthreads();
    }
    const float rstd = rsqrtf(sh[0] / (float)h + eps);
    for (long long c = t; c < h; c += THREADS) st(yr, c, (ld(xr, c) - mean) * rstd * ld(w, c) + ld(b, c));
}

extern "C" __global__ void ln_tree_f32(const float* __restrict__ x, const float* __restrict__ w, const float* __restrict__ b, float* __restrict__ y, long long rows, long long h, float eps) {
    body(x, w, b, y, rows, h, eps);
}
extern "C" __global__ void ln_tree_bf16(const __nv_bfloat16* __restrict__ x, const __nv_bfloat16* __restrict__ w, const __nv_bfloat16* __restrict__ b, __nv_bfloat16* __restrict__ y, long long rows, long long h, float eps) {
    body(x, w, b, y, rows, h, eps);
}
"""

KERNELS = {torch.float32: cuda_kernel(SOURCE, "ln_tree_f32"), torch.bfloat16: cuda_kernel(SOURCE, "ln_tree_bf16")}


class ModelNew(nn.Module):
    def __init__(self, hidden: int, eps: float = 1e-5):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(1.0 + 0.5 * torch.randn(hidden))
        self.bias = nn.Parameter(0.5 * torch.randn(hidden))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if x.dtype not in KERNELS or self.weight.dtype != x.dtype:
            raise TypeError(f"layer norm: float32 or bfloat16 input and parameters expected, got {x.dtype}")
        x = x.contiguous()
        w, b = self.weight.contiguous(), self.bias.contiguous()
        y = torch.empty_like(x)
        h = x.shape[-1]
        rows = x.numel() // h if h else 0
        if rows == 0:
            return y
        eps = float(self.eps)
        KERNELS[x.dtype](rows, 256, x, w, b, y, rows, h, eps)
        return y

"""LayerNorm candidate (fast format, CUDA): one thread per row (a naive sample), statistics in double over two
passes, then the affine write; float32 and bfloat16."""

import torch
import torch.nn as nn

from kbench_env.fastpath import cuda_kernel

SOURCE = r"""
#include <cuda_bf16.h>

__device__ __forceinline__ float ld(const float* p, long long i) { return p[i]; }
__device__ __forceinline__ float ld(const __nv_bfloat16* p, long long i) { return __bfloat162float(p[i]); }
__device__ __forceinline__ void st(float* p, long long i, float v) { p[i] = v; }
__device__ __forceinline__ void st(__nv_bfloat16* p, long long i, float v) { p[i] = __float2bfloat16(v); }

template <typename T>
__device__ void body(const T* __restrict__ x, const T* __restrict__ w, const T* __restrict__ b, T* __restrict__ y,
                     long long rows, long long h, float eps) {
    const long long row = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (row >= rows) return;
    const T* xr = x + row * h;
    T* yr = y + row * h;
    double s = 0.0;
    for (long long c = 0; c < h; ++c) s += ld(xr, c);
    const double mean = s / (double)h;
    double q = 0.0;
    for (long long c = 0; c < h; ++c) { const double d = ld(xr, c) - mean; q += d * d; }
    const double rstd = 1.0 / sqrt(q / (double)h + (double)eps);
    for (long long c = 0; c < h; ++c)
        st(yr, c, (float)((ld(xr, c) - mean) * rstd * ld(w, c) + ld(b, c)));
}

extern "C" __global__ void ln_naive_f32(const float* __restrict__ x, const float* __restrict__ w, const float* __restrict__ b, float* __restrict__ y, long long rows, long long h, float eps) {
    body(x, w, b, y, rows, h, eps);
}
extern "C" __global__ void ln_naive_bf16(const __nv_bfloat16* __restrict__ x, const __nv_bfloat16* __restrict__ w, const __nv_bfloat16* __restrict__ b, __nv_bfloat16* __restrict__ y, long long rows, long long h, float eps) {
    body(x, w, b, y, rows, h, eps);
}
"""

KERNELS = {torch.float32: cuda_kernel(SOURCE, "ln_naive_f32"), torch.bfloat16: cuda_kernel(SOURCE, "ln_naive_bf16")}


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
        KERNELS[x.dtype]((rows + 63) // 64, 64, x, w, b, y, rows, h, eps)
        return y

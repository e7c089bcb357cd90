"""LayerNorm candidate (fast format, CUDA): one warp per row, eight rows a block, two-pass statistics (mean,
then the mean of squared deviations) by shuffle reductions, then the affine write; float32 and bfloat16."""

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
    const long long row = (long long)blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32;
    if (row >= rows) return;  // whole warps leave together
    const int lane = threadIdx.x % 32;
    const T* xr = x + row * h;
    T* yr = y + row * h;
    float s = 0.f;
    for (long long c = lane; c < h; c += 32) s += ld(xr, c);
    for (int o = 16; o > 0; o >>= 1) s += __shfl_xor_sync(0xffffffffu, s, o);
    const float mean = s / (float)h;
    float q = 0.f;
    for (long long c = lane; c < h; c += 32) { const float d = ld(xr, c) - mean; q += d * d; }
    for (int o = 16; o > 0; o >>= 1) q += __shfl_xor_sync(0xffffffffu, q, o);
    const float rstd = rsqrtf(q / (float)h + eps);
    for (long long c = lane; c < h; c += 32) st(yr, c, (ld(xr, c) - mean) * rstd * ld(w, c) + ld(b, c));
}

extern "C" __global__ void ln_warp_f32(const float* __restrict__ x, const float* __restrict__ w, const float* __restrict__ b, float* __restrict__ y, long long rows, long long h, float eps) {
    body(x, w, b, y, rows, h, eps);
}
extern "C" __global__ void ln_warp_bf16(const __nv_bfloat16* __restrict__ x, const __nv_bfloat16* __restrict__ w, const __nv_bfloat16* __restrict__ b, __nv_bfloat16* __restrict__ y, long long rows, long long h, float eps) {
    body(x, w, b, y, rows, h, eps);
}
"""

KERNELS = {torch.float32: cuda_kernel(SOURCE, "ln_warp_f32"), torch.bfloat16: cuda_kernel(SOURCE, "ln_warp_bf16")}


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
        KERNELS[x.dtype]((rows + 7) // 8, 256, x, w, b, y, rows, h, eps)
        return y

"""LayerNorm candidate (fast format, CUDA): two kernels. One block per row writes the row's mean and 1/std
(two-pass, block reductions) to float32 buffers; a 2D elementwise kernel then applies them with the affine
parameters; float32 and bfloat16."""

import torch
import torch.nn as nn

from kbench_env.fastpath import cuda_kernel

SOURCE = r"""
#include <cuda_bf16.h>

__device__ __forceinline__ float ld(const float* p, long long i) { return p[i]; }
__device__ __forceinline__ float ld(const __nv_bfloat16* p, long long i) { return __bfloat162float(p[i]); }
__device__ __forceinline__ void st(float* p, long long i, float v) { p[i] = v; }
__device__ __forceinline__ void st(__nv_bfloat16* p, long long i, float v) { p[i] = __float2bfloat16(v); }

// The block's sum, returned to every thread (blockDim.x a multiple of 32, at most 1024).
__device__ float block_sum(float v, float* sh) {
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    const int lane = threadIdx.x % 32, warp = threadIdx.x / 32, nwarps = blockDim.x / 32;
    if (lane == 0) sh[warp] = v;
    __syncthreads();
    if (warp == 0) {
        v = lane < nwarps ? sh[lane] : 0.f;
        for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
        if (lane == 0) sh[32] = v;
    }
    __syncthreads();
    const float r = sh[32];
    __syncthreads();  // sh is free again for the next reduction
    return r;
}

template <typename T>
__device__ void stats(const T* __restrict__ x, float* __restrict__ mean, float* __restrict__ rstd, long long h,
                      float eps) {
    __shared__ float sh[33];
    const T* xr = x + (long long)blockIdx.x * h;
    float s = 0.f;
    for (long long c = threadIdx.x; c < h; c += blockDim.x) s += ld(xr, c);
    const float mu = block_sum(s, sh) / (float)h;
    float q = 0.f;
    for (long long c = threadIdx.x; c < h; c += blockDim.x) { const float d = ld(xr, c) - mu; q += d * d; }
    const float var = block_sum(q, sh) / (float)h;
    if (threadIdx.x == 0) { mean[blockIdx.x] = mu; rstd[blockIdx.x] = rsqrtf(var + eps); }
}

template <typename T>
__device__ void affine(const T* __restrict__ x, const float* __restrict__ mean, const float* __restrict__ rstd,
                       const T* __restrict__ w, const T* __restrict__ b, T* __restrict__ y, long long rows,
                       long long h) {
    const long long c = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (c >= h) return;
    const float wc = ld(w, c), bc = ld(b, c);
    for (long long r = blockIdx.y; r < rows; r += gridDim.y) {
        const long long i = r * h + c;
        st(y, i, (ld(x, i) - mean[r]) * rstd[r] * wc + bc);
    }
}

extern "C" __global__ void ln_stats_f32(const float* __restrict__ x, float* __restrict__ mean, float* __restrict__ rstd, long long h, float eps) {
    stats(x, mean, rstd, h, eps);
}
extern "C" __global__ void ln_stats_bf16(const __nv_bfloat16* __restrict__ x, float* __restrict__ mean, float* __restrict__ rstd, long long h, float eps) {
    stats(x, mean, rstd, h, eps);
}

extern "C" __global__ void ln_affine_f32(const float* __restrict__ x, const float* __restrict__ mean, const float* __restrict__ rstd, const float* __restrict__ w, const float* __restrict__ b, float* __restrict__ y, long long rows, long long h) {
    affine(x, mean, rstd, w, b, y, rows, h);
}
extern "C" __global__ void ln_affine_bf16(const __nv_bfloat16* __restrict__ x, const float* __restrict__ mean, const float* __restrict__ rstd, const __nv_bfloat16* __restrict__ w, const __nv_bfloat16* __restrict__ b, __nv_bfloat16* __restrict__ y, long long rows, long long h) {
    affine(x, mean, rstd, w, b, y, rows, h);
}
"""

KERNELS = {torch.float32: (cuda_kernel(SOURCE, "ln_stats_f32"), cuda_kernel(SOURCE, "ln_affine_f32")),
           torch.bfloat16: (cuda_kernel(SOURCE, "ln_stats_bf16"), cuda_kernel(SOURCE, "ln_affine_bf16"))}


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
        stats, affine = KERNELS[x.dtype]
        mean = torch.empty(rows, dtype=torch.float32, device=x.device)
        rstd = torch.empty(rows, dtype=torch.float32, device=x.device)
        stats(rows, 256, x, mean, rstd, h, eps)
        affine(((h + 255) // 256, min(rows, 65535)), 256, x, mean, rstd, w, b, y, rows, h)
        return y

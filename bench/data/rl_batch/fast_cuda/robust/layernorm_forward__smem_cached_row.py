"""LayerNorm candidate (fast format, CUDA): one block of 256 threads per row, the row read once from global
memory into dynamic shared memory (as float), two-pass statistics and the affine write from there; float32
and bfloat16 (rows up to 12288 elements)."""

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
__device__ void body(const T* __restrict__ x, const T* __restrict__ w, const T* __restrict__ b, T* __restrict__ y,
                     long long rows, long long h, float eps) {
    extern __shared__ float row[];
    __shared__ float sh[33];
    const T* xr = x + (long long)blockIdx.x * h;
    T* yr = y + (long long)blockIdx.x * h;
    float s = 0.f;
    for (long long c = threadIdx.x; c < h; c += blockDim.x) { const float v = ld(xr, c); row[c] = v; s += v; }
    const float mean = block_sum(s, sh) / (float)h;  // its barriers also publish row[]
    float q = 0.f;
    for (long long c = threadIdx.x; c < h; c += blockDim.x) { const float d = row[c] - mean; q += d * d; }
    const float rstd = rsqrtf(block_sum(q, sh) / (float)h + eps);
    for (long long c = threadIdx.x; c < h; c += blockDim.x) st(yr, c, (row[c] - mean) * rstd * ld(w, c) + ld(b, c));
}

extern "C" __global__ void ln_smem_f32(const float* __restrict__ x, const float* __restrict__ w, const float* __restrict__ b, float* __restrict__ y, long long rows, long long h, float eps) {
    body(x, w, b, y, rows, h, eps);
}
extern "C" __global__ void ln_smem_bf16(const __nv_bfloat16* __restrict__ x, const __nv_bfloat16* __restrict__ w, const __nv_bfloat16* __restrict__ b, __nv_bfloat16* __restrict__ y, long long rows, long long h, float eps) {
    body(x, w, b, y, rows, h, eps);
}
"""

KERNELS = {torch.float32: cuda_kernel(SOURCE, "ln_smem_f32"), torch.bfloat16: cuda_kernel(SOURCE, "ln_smem_bf16")}


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
        if h * 4 > 48 * 1024:
            raise ValueError(f"layer norm (shared-memory row cache): rows of at most 12288 elements, got {h}")
        KERNELS[x.dtype](rows, 256, x, w, b, y, rows, h, eps, shared_mem=h * 4)
        return y

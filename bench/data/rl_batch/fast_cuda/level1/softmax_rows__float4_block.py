"""Softmax candidate (fast format, CUDA): one block of 256 threads per row; float32 rows whose length is a
multiple of 4 (every row then starts 16-byte aligned) are read and written as float4, other rows and bfloat16
element by element; three passes, block reductions through shuffles and shared memory."""

import torch
import torch.nn as nn

from kbench_env.fastpath import cuda_kernel

SOURCE = r"""
#include <cuda_bf16.h>

#define NEG_BIG (-3.402823466e38f)

__device__ __forceinline__ float ld(const float* p, long long i) { return p[i]; }
__device__ __forceinline__ float ld(const __nv_bfloat16* p, long long i) { return __bfloat162float(p[i]); }
__device__ __forceinline__ void st(float* p, long long i, float v) { p[i] = v; }
__device__ __forceinline__ void st(__nv_bfloat16* p, long long i, float v) { p[i] = __float2bfloat16(v); }

template <bool MAX>
__device__ float block_reduce(float v, float* sh) {
    for (int o = 16; o > 0; o >>= 1) {
        const float w = __shfl_xor_sync(0xffffffffu, v, o);
        v = MAX ? fmaxf(v, w) : v + w;
    }
    const int lane = threadIdx.x % 32, warp = threadIdx.x / 32, nwarps = blockDim.x / 32;
    if (lane == 0) sh[warp] = v;
    __syncthreads();
    if (warp == 0) {
        v = lane < nwarps ? sh[lane] : (MAX ? NEG_BIG : 0.f);
        for (int o = 16; o > 0; o >>= 1) {
            const float w = __shfl_xor_sync(0xffffffffu, v, o);
            v = MAX ? fmaxf(v, w) : v + w;
        }
        if (lane == 0) sh[32] = v;
    }
    __syncthreads();
    const float r = sh[32];
    __syncthreads();
    return r;
}

extern "C" __global__ void softmax_f4(const float* __restrict__ x, float* __restrict__ y, long long cols) {
    __shared__ float sh[33];
    const long long n4 = cols / 4;
    const float4* xr = reinterpret_cast<const float4*>(x + blockIdx.x * cols);
    float4* yr = reinterpret_cast<float4*>(y + blockIdx.x * cols);
    float m = NEG_BIG;
    for (long long c = threadIdx.x; c < n4; c += blockDim.x) {
        const float4 v = xr[c];
        m = fmaxf(m, fmaxf(fmaxf(v.x, v.y), fmaxf(v.z, v.w)));
    }
    m = block_reduce<true>(m, sh);
    float s = 0.f;
    for (long long c = threadIdx.x; c < n4; c += blockDim.x) {
        const float4 v = xr[c];
        s += expf(v.x - m) + expf(v.y - m) + expf(v.z - m) + expf(v.w - m);
    }
    const float inv = 1.f / block_reduce<false>(s, sh);
    for (long long c = threadIdx.x; c < n4; c += blockDim.x) {
        const float4 v = xr[c];
        yr[c] = make_float4(expf(v.x - m) * inv, expf(v.y - m) * inv, expf(v.z - m) * inv, expf(v.w - m) * inv);
    }
}

template <typename T>
__device__ void scalar_rows(const T* __restrict__ x, T* __restrict__ y, long long cols) {
    __shared__ float sh[33];
    const T* xr = x + blockIdx.x * cols;
    T* yr = y + blockIdx.x * cols;
    float m = NEG_BIG;
    for (long long c = threadIdx.x; c < cols; c += blockDim.x) m = fmaxf(m, ld(xr, c));
    m = block_reduce<true>(m, sh);
    float s = 0.f;
    for (long long c = threadIdx.x; c < cols; c += blockDim.x) s += expf(ld(xr, c) - m);
    const float inv = 1.f / block_reduce<false>(s, sh);
    for (long long c = threadIdx.x; c < cols; c += blockDim.x) st(yr, c, expf(ld(xr, c) - m) * inv);
}

extern "C" __global__ void softmax_s_f32(const float* x, float* y, long long cols) { scalar_rows(x, y, cols); }
extern "C" __global__ void softmax_s_bf16(const __nv_bfloat16* x, __nv_bfloat16* y, long long cols) {
    scalar_rows(x, y, cols);
}
"""

VEC = cuda_kernel(SOURCE, "softmax_f4")
KERNELS = {torch.float32: cuda_kernel(SOURCE, "softmax_s_f32"), torch.bfloat16: cuda_kernel(SOURCE, "softmax_s_bf16")}


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if x.dtype not in KERNELS:
            raise TypeError(f"softmax: float32 or bfloat16 input expected, got {x.dtype}")
        x = x.contiguous()
        y = torch.empty_like(x)
        cols = x.shape[-1]
        rows = x.numel() // cols if cols else 0
        if rows == 0:
            return y
        if x.dtype == torch.float32 and cols % 4 == 0 and x.data_ptr() % 16 == 0 and y.data_ptr() % 16 == 0:
            VEC(rows, 256, x, y, cols)
        else:
            KERNELS[x.dtype](rows, 256, x, y, cols)
        return y

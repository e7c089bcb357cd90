"""GELU candidate (fast format, CUDA): float32 through float4 loads and stores over the 16-byte-aligned body,
bfloat16 eight at a time through 16-byte vectors, and a scalar kernel for the tail; erf form in float."""

import torch
import torch.nn as nn

from kbench_env.fastpath import cuda_kernel

SOURCE = r"""
#include <cuda_bf16.h>

__device__ __forceinline__ float ld(const float* p, long long i) { return p[i]; }
__device__ __forceinline__ float ld(const __nv_bfloat16* p, long long i) { return __bfloat162float(p[i]); }
__device__ __forceinline__ void st(float* p, long long i, float v) { p[i] = v; }
__device__ __forceinline__ void st(__nv_bfloat16* p, long long i, float v) { p[i] = __float2bfloat16(v); }

__device__ __forceinline__ float g(float v) { return 0.5f * v * (1.f + erff(v * 0.70710678118654752f)); }

extern "C" __global__ void gelu_vec_f32(const float4* __restrict__ x, float4* __restrict__ y, long long n4) {
    const long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n4) {
        float4 v = x[i];
        v.x = g(v.x); v.y = g(v.y); v.z = g(v.z); v.w = g(v.w);
        y[i] = v;
    }
}

extern "C" __global__ void gelu_vec_bf16(const __nv_bfloat16* __restrict__ x, __nv_bfloat16* __restrict__ y,
                                         long long n8) {
    const long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n8) {
        uint4 raw = reinterpret_cast<const uint4*>(x)[i];
        __nv_bfloat162* h = reinterpret_cast<__nv_bfloat162*>(&raw);
        #pragma unroll
        for (int k = 0; k < 4; ++k) {
            const float2 f = __bfloat1622float2(h[k]);
            h[k] = __floats2bfloat162_rn(g(f.x), g(f.y));
        }
        reinterpret_cast<uint4*>(y)[i] = raw;
    }
}

template <typename T>
__device__ void tail(const T* __restrict__ x, T* __restrict__ y, long long start, long long n) {
    const long long i = start + (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) st(y, i, g(ld(x, i)));
}

extern "C" __global__ void gelu_tail_f32(const float* x, float* y, long long start, long long n) {
    tail(x, y, start, n);
}
extern "C" __global__ void gelu_tail_bf16(const __nv_bfloat16* x, __nv_bfloat16* y, long long start, long long n) {
    tail(x, y, start, n);
}
"""

KERNELS = {torch.float32: (cuda_kernel(SOURCE, "gelu_vec_f32"), cuda_kernel(SOURCE, "gelu_tail_f32"), 4),
           torch.bfloat16: (cuda_kernel(SOURCE, "gelu_vec_bf16"), cuda_kernel(SOURCE, "gelu_tail_bf16"), 8)}


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if x.dtype not in KERNELS:
            raise TypeError(f"gelu: float32 or bfloat16 input expected, got {x.dtype}")
        x = x.contiguous()
        y = torch.empty_like(x)
        n = x.numel()
        vec, tail, width = KERNELS[x.dtype]
        threads = 256
        aligned = x.data_ptr() % 16 == 0 and y.data_ptr() % 16 == 0
        nv = n // width if aligned else 0  # vectors over the aligned body; everything scalar otherwise
        if nv:
            vec((nv + threads - 1) // threads, threads, x, y, nv)
        start = nv * width
        if start < n:
            tail((n - start + threads - 1) // threads, threads, x, y, start, n)
        return y

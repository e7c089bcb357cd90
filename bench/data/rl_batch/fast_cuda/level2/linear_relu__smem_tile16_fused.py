"""Linear + ReLU candidate (fast format, CUDA): 16 x 16 output tiles, x and W staged through shared memory 16
columns of k at a time (padded against bank conflicts), bias and ReLU fused into the store; float32 and bfloat16."""

import torch
import torch.nn as nn

from kbench_env.fastpath import cuda_kernel

SOURCE = r"""
#include <cuda_bf16.h>

__device__ __forceinline__ float ld(const float* p, long long i) { return p[i]; }
__device__ __forceinline__ float ld(const __nv_bfloat16* p, long long i) { return __bfloat162float(p[i]); }
__device__ __forceinline__ void st(float* p, long long i, float v) { p[i] = v; }
__device__ __forceinline__ void st(__nv_bfloat16* p, long long i, float v) { p[i] = __float2bfloat16(v); }

#define TS 16

// acc for y[row, col] of a 16 x 16 output tile: x and W staged through shared memory 16 columns of k at a time.
template <typename T>
__device__ float tile_dot(const T* __restrict__ x, const T* __restrict__ w, long long m, long long n, long long k,
                          long long row, long long col) {
    __shared__ float xs[TS][TS + 1];
    __shared__ float ws[TS][TS + 1];
    const int tx = threadIdx.x, ty = threadIdx.y;
    const long long wrow = (long long)blockIdx.x * TS + ty;  // the W row (output column) this thread stages
    float acc = 0.f;
    for (long long k0 = 0; k0 < k; k0 += TS) {
        const long long kk = k0 + tx;
        xs[ty][tx] = (row < m && kk < k) ? ld(x, row * k + kk) : 0.f;
        ws[ty][tx] = (wrow < n && kk < k) ? ld(w, wrow * k + kk) : 0.f;
        __syncthreads();
        #pragma unroll
        for (int t = 0; t < TS; ++t) acc = fmaf(xs[ty][t], ws[tx][t], acc);
        __syncthreads();
    }
    return acc;
}

template <typename T>
__device__ void body(const T* __restrict__ x, const T* __restrict__ w, const T* __restrict__ b, T* __restrict__ y,
                     long long m, long long n, long long k) {
    const long long row = (long long)blockIdx.y * TS + threadIdx.y;
    const long long col = (long long)blockIdx.x * TS + threadIdx.x;
    const float acc = tile_dot(x, w, m, n, k, row, col);
    if (row < m && col < n) {
        const float v = acc + ld(b, col);
        st(y, row * n + col, v > 0.f ? v : 0.f);
    }
}

extern "C" __global__ void lr_t16_f32(const float* __restrict__ x, const float* __restrict__ w, const float* __restrict__ b, float* __restrict__ y, long long m, long long n, long long k) {
    body(x, w, b, y, m, n, k);
}
extern "C" __global__ void lr_t16_bf16(const __nv_bfloat16* __restrict__ x, const __nv_bfloat16* __restrict__ w, const __nv_bfloat16* __restrict__ b, __nv_bfloat16* __restrict__ y, long long m, long long n, long long k) {
    body(x, w, b, y, m, n, k);
}
"""

KERNELS = {torch.float32: cuda_kernel(SOURCE, "lr_t16_f32"),
           torch.bfloat16: cuda_kernel(SOURCE, "lr_t16_bf16")}


class ModelNew(nn.Module):
    def __init__(self, in_features: int, out_features: int):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        w, b = self.linear.weight, self.linear.bias
        if x.dtype not in KERNELS or w.dtype != x.dtype or b.dtype != x.dtype:
            raise TypeError(f"linear + relu: float32 or bfloat16 input and parameters expected, got {x.dtype}")
        x, w, b = x.contiguous(), w.contiguous(), b.contiguous()
        k = x.shape[-1]
        m = x.numel() // k if k else 0
        n = w.shape[0]
        y = torch.empty((*x.shape[:-1], n), dtype=x.dtype, device=x.device)
        if m == 0 or n == 0:
            return y
        kern = KERNELS[x.dtype]
        kern(((n + 15) // 16, (m + 15) // 16), (16, 16), x, w, b, y, m, n, k)
        return y

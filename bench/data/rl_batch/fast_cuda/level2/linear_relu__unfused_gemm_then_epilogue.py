"""Linear + ReLU candidate (fast format, CUDA): unfused. A 16 x 16 shared-memory tiled GEMM writes x W^T to a
float32 buffer; a second, elementwise kernel adds the bias, applies ReLU and writes the output dtype; float32 and
bfloat16."""

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
__device__ void gemm(const T* __restrict__ x, const T* __restrict__ w, float* __restrict__ acc_out, long long m,
                     long long n, long long k) {
    const long long row = (long long)blockIdx.y * TS + threadIdx.y;
    const long long col = (long long)blockIdx.x * TS + threadIdx.x;
    const float acc = tile_dot(x, w, m, n, k, row, col);
    if (row < m && col < n) acc_out[row * n + col] = acc;
}

template <typename T>
__device__ void epilogue(const float* __restrict__ acc, const T* __restrict__ b, T* __restrict__ y, long long m,
                         long long n) {
    const long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= m * n) return;
    const float v = acc[i] + ld(b, i % n);
    st(y, i, v > 0.f ? v : 0.f);
}

extern "C" __global__ void lr_gemm_f32(const float* __restrict__ x, const float* __restrict__ w, float* __restrict__ acc, long long m, long long n, long long k) {
    gemm(x, w, acc, m, n, k);
}
extern "C" __global__ void lr_gemm_bf16(const __nv_bfloat16* __restrict__ x, const __nv_bfloat16* __restrict__ w, float* __restrict__ acc, long long m, long long n, long long k) {
    gemm(x, w, acc, m, n, k);
}

extern "C" __global__ void lr_epi_f32(const float* __restrict__ acc, const float* __restrict__ b, float* __restrict__ y, long long m, long long n) {
    epilogue(acc, b, y, m, n);
}
extern "C" __global__ void lr_epi_bf16(const float* __restrict__ acc, const __nv_bfloat16* __restrict__ b, __nv_bfloat16* __restrict__ y, long long m, long long n) {
    epilogue(acc, b, y, m, n);
}
"""

KERNELS = {torch.float32: (cuda_kernel(SOURCE, "lr_gemm_f32"), cuda_kernel(SOURCE, "lr_epi_f32")),
           torch.bfloat16: (cuda_kernel(SOURCE, "lr_gemm_bf16"), cuda_kernel(SOURCE, "lr_epi_bf16"))}


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
        gemm, epilogue = KERNELS[x.dtype]
        acc = torch.empty((m, n), dtype=torch.float32, device=x.device)
        gemm(((n + 15) // 16, (m + 15) // 16), (16, 16), x, w, acc, m, n, k)
        epilogue((m * n + 255) // 256, 256, acc, b, y, m, n)
        return y

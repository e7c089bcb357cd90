"""Linear + ReLU candidate (fast format, CUDA): 32 x 32 output tiles per block of 16 x 16 threads, each thread a
2 x 2 register tile, x and W staged through padded shared memory 16 columns of k at a time, bias and ReLU fused;
float32 and bfloat16."""

import torch
import torch.nn as nn

from kbench_env.fastpath import cuda_kernel

SOURCE = r"""
#include <cuda_bf16.h>

__device__ __forceinline__ float ld(const float* p, long long i) { return p[i]; }
__device__ __forceinline__ float ld(const __nv_bfloat16* p, long long i) { return __bfloat162float(p[i]); }
__device__ __forceinline__ void st(float* p, long long i, float v) { p[i] = v; }
__device__ __forceinline__ void st(__nv_bfloat16* p, long long i, float v) { p[i] = __float2bfloat16(v); }

#define BM 32
#define BK 16
#define R 2

// A BM x BM output tile per block of 16 x 16 threads, each thread R x R outputs (rows ty + 16 i, columns tx + 16 j);
// x and W staged BK columns of k at a time.
template <typename T>
__device__ void body(const T* __restrict__ x, const T* __restrict__ w, const T* __restrict__ b, T* __restrict__ y,
                     long long m, long long n, long long k) {
    __shared__ float xs[BM][BK + 1];
    __shared__ float ws[BM][BK + 1];
    const int tx = threadIdx.x, ty = threadIdx.y, tid = ty * 16 + tx;
    const long long bm = (long long)blockIdx.y * BM, bn = (long long)blockIdx.x * BM;
    float acc[R][R];
    #pragma unroll
    for (int i = 0; i < R; ++i)
        #pragma unroll
        for (int j = 0; j < R; ++j) acc[i][j] = 0.f;
    for (long long k0 = 0; k0 < k; k0 += BK) {
        for (int l = tid; l < BM * BK; l += 256) {
            const int r = l / BK, c = l % BK;
            const long long kk = k0 + c;
            xs[r][c] = (bm + r < m && kk < k) ? ld(x, (bm + r) * k + kk) : 0.f;
            ws[r][c] = (bn + r < n && kk < k) ? ld(w, (bn + r) * k + kk) : 0.f;
        }
        __syncthreads();
        #pragma unroll
        for (int t = 0; t < BK; ++t) {
            float a[R], bw[R];
            #pragma unroll
            for (int i = 0; i < R; ++i) a[i] = xs[ty + 16 * i][t];
            #pragma unroll
            for (int j = 0; j < R; ++j) bw[j] = ws[tx + 16 * j][t];
            #pragma unroll
            for (int i = 0; i < R; ++i)
                #pragma unroll
                for (int j = 0; j < R; ++j) acc[i][j] = fmaf(a[i], bw[j], acc[i][j]);
        }
        __syncthreads();
    }
    #pragma unroll
    for (int i = 0; i < R; ++i) {
        const long long row = bm + ty + 16 * i;
        #pragma unroll
        for (int j = 0; j < R; ++j) {
            const long long col = bn + tx + 16 * j;
            if (row < m && col < n) {
                const float v = acc[i][j] + ld(b, col);
                st(y, row * n + col, v > 0.f ? v : 0.f);
            }
        }
    }
}

extern "C" __global__ void lr_t32_f32(const float* __restrict__ x, const float* __restrict__ w, const float* __restrict__ b, float* __restrict__ y, long long m, long long n, long long k) {
    body(x, w, b, y, m, n, k);
}
extern "C" __global__ void lr_t32_bf16(const __nv_bfloat16* __restrict__ x, const __nv_bfloat16* __restrict__ w, const __nv_bfloat16* __restrict__ b, __nv_bfloat16* __restrict__ y, long long m, long long n, long long k) {
    body(x, w, b, y, m, n, k);
}
"""

KERNELS = {torch.float32: cuda_kernel(SOURCE, "lr_t32_f32"),
           torch.bfloat16: cuda_kernel(SOURCE, "lr_t32_bf16")}


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
        kern(((n + 31) // 32, (m + 31) // 32), (16, 16), x, w, b, y, m, n, k)
        return y

"""Linear + ReLU candidate (fast format, CUDA): one thread per output y[i, j] (a naive sample), the dot product of
row i of x and row j of W accumulated in float, bias and ReLU fused; float32 and bfloat16."""

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
                     long long m, long long n, long long k) {
    const long long j = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    const long long i = blockIdx.y;
    if (j >= n || i >= m) return;
    const T* xr = x + i * k;
    const T* wr = w + j * k;
    float acc = 0.f;
    for (long long t = 0; t < k; ++t) acc = fmaf(ld(xr, t), ld(wr, t), acc);
    acc += ld(b, j);
    st(y, i * n + j, acc > 0.f ? acc : 0.f);
}

extern "C" __global__ void lr_naive_f32(const float* __restrict__ x, const float* __restrict__ w, const float* __restrict__ b, float* __restrict__ y, long long m, long long n, long long k) {
    body(x, w, b, y, m, n, k);
}
extern "C" __global__ void lr_naive_bf16(const __nv_bfloat16* __restrict__ x, const __nv_bfloat16* __restrict__ w, const __nv_bfloat16* __restrict__ b, __nv_bfloat16* __restrict__ y, long long m, long long n, long long k) {
    body(x, w, b, y, m, n, k);
}
"""

KERNELS = {torch.float32: cuda_kernel(SOURCE, "lr_naive_f32"),
           torch.bfloat16: cuda_kernel(SOURCE, "lr_naive_bf16")}


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
        kern(((n + 127) // 128, m), 128, x, w, b, y, m, n, k)
        return y

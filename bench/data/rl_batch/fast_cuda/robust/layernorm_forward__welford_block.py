"""LayerNorm candidate (fast format, CUDA): one block of 128 threads per row, a Welford (count, mean, M2) per
thread over its elements in one read pass, merged across lanes and warps with Chan's formula, then the affine
write; float32 and bfloat16."""

import torch
import torch.nn as nn

from kbench_env.fastpath import cuda_kernel

SOURCE = r"""
#include <cuda_bf16.h>

__device__ __forceinline__ float ld(const float* p, long long i) { return p[i]; }
__device__ __forceinline__ float ld(const __nv_bfloat16* p, long long i) { return __bfloat162float(p[i]); }
__device__ __forceinline__ void st(float* p, long long i, float v) { p[i] = v; }
__device__ __forceinline__ void st(__nv_bfloat16* p, long long i, float v) { p[i] = __float2bfloat16(v); }

__device__ __forceinline__ void merge(float& n, float& m, float& m2, float nb, float mb, float m2b) {
    const float nn = n + nb;
    if (nn == 0.f) return;
    const float d = mb - m;
    m += d * (nb / nn);
    m2 += m2b + d * d * (n * nb / nn);
    n = nn;
}

template <typename T>
__device__ void body(const T* __restrict__ x, const T* __restrict__ w, const T* __restrict__ b, T* __restrict__ y,
                     long long rows, long long h, float eps) {
    __shared__ float sn[32], sm[32], sq[32];
    const T* xr = x + (long long)blockIdx.x * h;
    T* yr = y + (long long)blockIdx.x * h;
    float n = 0.f, m = 0.f, m2 = 0.f;
    for (long long c = threadIdx.x; c < h; c += blockDim.x) {
        const float v = ld(xr, c);
        n += 1.f;
        const float d = v - m;
        m += d / n;
        m2 += d * (v - m);
    }
    for (int o = 16; o > 0; o >>= 1) {
        const float nb = __shfl_xor_sync(0xffffffffu, n, o);
        const float mb = __shfl_xor_sync(0xffffffffu, m, o);
        const float qb = __shfl_xor_sync(0xffffffffu, m2, o);
        merge(n, m, m2, nb, mb, qb);
    }
    const int lane = threadIdx.x % 32, warp = threadIdx.x / 32, nwarps = blockDim.x / 32;
    if (lane == 0) { sn[warp] = n; sm[warp] = m; sq[warp] = m2; }
    __syncthreads();
    if (warp == 0) {
        n = lane < nwarps ? sn[lane] : 0.f;
        m = lane < nwarps ? sm[lane] : 0.f;
        m2 = lane < nwarps ? sq[lane] : 0.f;
        for (int o = 16; o > 0; o >>= 1) {
            const float nb = __shfl_xor_sync(0xffffffffu, n, o);
            const float mb = __shfl_xor_sync(0xffffffffu, m, o);
            const float qb = __shfl_xor_sync(0xffffffffu, m2, o);
            merge(n, m, m2, nb, mb, qb);
        }
        if (lane == 0) { sm[0] = m; sq[0] = m2; }
    }
    __syncthreads();
    const float mean = sm[0];
    const float rstd = rsqrtf(sq[0] / (float)h + eps);
    for (long long c = threadIdx.x; c < h; c += blockDim.x)
        st(yr, c, (ld(xr, c) - mean) * rstd * ld(w, c) + ld(b, c));
}

extern "C" __global__ void ln_welford_f32(const float* __restrict__ x, const float* __restrict__ w, const float* __restrict__ b, float* __restrict__ y, long long rows, long long h, float eps) {
    body(x, w, b, y, rows, h, eps);
}
extern "C" __global__ void ln_welford_bf16(const __nv_bfloat16* __restrict__ x, const __nv_bfloat16* __restrict__ w, const __nv_bfloat16* __restrict__ b, __nv_bfloat16* __restrict__ y, long long rows, long long h, float eps) {
    body(x, w, b, y, rows, h, eps);
}
"""

KERNELS = {torch.float32: cuda_kernel(SOURCE, "ln_welford_f32"), torch.bfloat16: cuda_kernel(SOURCE, "ln_welford_bf16")}


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
        KERNELS[x.dtype](rows, 128, x, w, b, y, rows, h, eps)
        return y

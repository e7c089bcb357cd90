"""Softmax candidate (fast format, CUDA): two kernels. The first, one block per row, writes each row's maximum and
sum of exponentials (block reductions through warp shuffles and shared memory) to float32 buffers; the second, a 2D
elementwise launch, writes exp(x - max) / sum. float32 and bfloat16."""

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

// op 0: maximum, 1: sum. Every thread of the block gets the result.
__device__ float block_reduce(float v, int op, float* sh) {
    for (int o = 16; o > 0; o >>= 1) {
        const float w = __shfl_xor_sync(0xffffffffu, v, o);
        v = op ? v + w : fmaxf(v, w);
    }
    const int lane = threadIdx.x % 32, warp = threadIdx.x / 32, nwarps = blockDim.x / 32;
    if (lane == 0) sh[warp] = v;
    __syncthreads();
    if (warp == 0) {
        v = lane < nwarps ? sh[lane] : (op ? 0.f : NEG_BIG);
        for (int o = 16; o > 0; o >>= 1) {
            const float w = __shfl_xor_sync(0xffffffffu, v, o);
            v = op ? v + w : fmaxf(v, w);
        }
        if (lane == 0) sh[32] = v;
    }
    __syncthreads();
    const float r = sh[32];
    __syncthreads();  // sh is free again for the next reduction
    return r;
}

template <typename T>
__device__ void stats(const T* __restrict__ x, float* __restrict__ mx, float* __restrict__ sm, long long cols) {
    __shared__ float sh[33];
    const long long row = blockIdx.x;
    const T* xr = x + row * cols;
    float m = NEG_BIG;
    for (long long c = threadIdx.x; c < cols; c += blockDim.x) m = fmaxf(m, ld(xr, c));
    m = block_reduce(m, 0, sh);
    float s = 0.f;
    for (long long c = threadIdx.x; c < cols; c += blockDim.x) s += expf(ld(xr, c) - m);
    s = block_reduce(s, 1, sh);
    if (threadIdx.x == 0) { mx[row] = m; sm[row] = s; }
}

template <typename T>
__device__ void normalise(const T* __restrict__ x, const float* __restrict__ mx, const float* __restrict__ sm,
                          T* __restrict__ y, long long rows, long long cols) {
    const long long c = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (c >= cols) return;
    for (long long r = blockIdx.y; r < rows; r += gridDim.y) {
        const long long i = r * cols + c;
        st(y, i, expf(ld(x, i) - mx[r]) / sm[r]);
    }
}

extern "C" __global__ void sm_stats_f32(const float* x, float* mx, float* sm, long long cols) {
    stats(x, mx, sm, cols);
}
extern "C" __global__ void sm_stats_bf16(const __nv_bfloat16* x, float* mx, float* sm, long long cols) {
    stats(x, mx, sm, cols);
}
extern "C" __global__ void sm_norm_f32(const float* x, const float* mx, const float* sm, float* y, long long rows,
                                       long long cols) {
    normalise(x, mx, sm, y, rows, cols);
}
extern "C" __global__ void sm_norm_bf16(const __nv_bfloat16* x, const float* mx, const float* sm, __nv_bfloat16* y,
                                        long long rows, long long cols) {
    normalise(x, mx, sm, y, rows, cols);
}
"""

KERNELS = {torch.float32: (cuda_kernel(SOURCE, "sm_stats_f32"), cuda_kernel(SOURCE, "sm_norm_f32")),
           torch.bfloat16: (cuda_kernel(SOURCE, "sm_stats_bf16"), cuda_kernel(SOURCE, "sm_norm_bf16"))}


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if x.dtype not in KERNELS:
            raise TypeError(f"softmax: float32 or bfloat16 input expected, got {x.dtype}")
        stats, norm = KERNELS[x.dtype]
        x = x.contiguous()
        y = torch.empty_like(x)
        cols = x.shape[-1]
        rows = x.numel() // cols if cols else 0
        if rows == 0:
            return y
        mx = torch.empty(rows, dtype=torch.float32, device=x.device)
        sm = torch.empty(rows, dtype=torch.float32, device=x.device)
        stats(rows, 256, x, mx, sm, cols)
        threads = 256
        norm(((cols + threads - 1) // threads, min(rows, 65535)), threads, x, mx, sm, y, rows, cols)
        return y

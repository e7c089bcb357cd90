"""ReLU in the fast format for the cuda backend (kbench_env.fastpath.cuda_kernel: no torch headers, ~1 s builds):
16-byte vector loads and stores (4 float32 or 8 bfloat16 values) when the input and output are 16-byte aligned,
UNROLL of them in flight per thread, a scalar tail; otherwise one element per load. bfloat16 is handled on its
bits (a negative, non-NaN value becomes +0), so it needs no conversion and no CUDA header."""

import torch
import torch.nn as nn

from kbench_env.fastpath import cuda_kernel

SOURCE = r"""
constexpr int BLOCK = 256;  // kbench-tune: 128 256 512 1024
constexpr int UNROLL = 4;  // kbench-tune: 1 2 4 8

__device__ __forceinline__ unsigned relu_word_f32(unsigned w) {
    return (w & 0x80000000u) && (w & 0x7fffffffu) <= 0x7f800000u ? 0u : w;  // NaN keeps its sign and payload
}
__device__ __forceinline__ unsigned short relu_half_bf16(unsigned short h) {
    return (h & 0x8000u) && (h & 0x7fffu) <= 0x7f80u ? (unsigned short)0 : h;
}
__device__ __forceinline__ unsigned relu_word_bf16(unsigned w) {  // two bfloat16 lanes
    return (unsigned)relu_half_bf16((unsigned short)(w & 0xffffu)) |
           ((unsigned)relu_half_bf16((unsigned short)(w >> 16)) << 16);
}
__device__ __forceinline__ unsigned relu_scalar(unsigned w) { return relu_word_f32(w); }
__device__ __forceinline__ unsigned short relu_scalar(unsigned short h) { return relu_half_bf16(h); }

// S: the element's bits (unsigned: float32, unsigned short: bfloat16); WORD applies ReLU to a 32-bit word.
template <typename S, unsigned (*WORD)(unsigned)>
__device__ __forceinline__ void relu_body(const S* __restrict__ x, S* __restrict__ y, long long n, long long vec) {
    const long long tile = (long long)blockIdx.x * (BLOCK * UNROLL) + threadIdx.x;
    if (vec) {
        constexpr int PER = 16 / sizeof(S);
        const long long nv = n / PER;
        const uint4* xv = reinterpret_cast<const uint4*>(x);
        uint4* yv = reinterpret_cast<uint4*>(y);
        uint4 r[UNROLL];
#pragma unroll
        for (int k = 0; k < UNROLL; ++k) {
            const long long i = tile + (long long)k * BLOCK;
            if (i < nv) r[k] = xv[i];
        }
#pragma unroll
        for (int k = 0; k < UNROLL; ++k) {
            const long long i = tile + (long long)k * BLOCK;
            if (i < nv) yv[i] = make_uint4(WORD(r[k].x), WORD(r[k].y), WORD(r[k].z), WORD(r[k].w));
        }
        const long long rest = n - nv * PER;  // fewer than PER elements after the last whole vector
        if (blockIdx.x == 0 && threadIdx.x < rest) y[nv * PER + threadIdx.x] = relu_scalar(x[nv * PER + threadIdx.x]);
    } else {
        S r[UNROLL];
#pragma unroll
        for (int k = 0; k < UNROLL; ++k) {
            const long long i = tile + (long long)k * BLOCK;
            if (i < n) r[k] = x[i];
        }
#pragma unroll
        for (int k = 0; k < UNROLL; ++k) {
            const long long i = tile + (long long)k * BLOCK;
            if (i < n) y[i] = relu_scalar(r[k]);
        }
    }
}

extern "C" __global__ void __launch_bounds__(BLOCK) relu_f32(const unsigned* __restrict__ x, unsigned* __restrict__ y,
                                                             long long n, long long vec) {
    relu_body<unsigned, relu_word_f32>(x, y, n, vec);
}

extern "C" __global__ void __launch_bounds__(BLOCK) relu_bf16(const unsigned short* __restrict__ x,
                                                              unsigned short* __restrict__ y, long long n, long long vec) {
    relu_body<unsigned short, relu_word_bf16>(x, y, n, vec);
}
"""


def _tuned(name: str) -> int:
    """The value of the source's ``constexpr int NAME`` (the launch must match what the kernel was built with)."""
    return int(SOURCE.split(f"constexpr int {name} = ", 1)[1].split(";", 1)[0])


BLOCK, UNROLL = _tuned("BLOCK"), _tuned("UNROLL")
KERNELS = {torch.float32: cuda_kernel(SOURCE, "relu_f32"), torch.bfloat16: cuda_kernel(SOURCE, "relu_bf16")}


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if x.dtype not in KERNELS:
            raise TypeError(f"relu (fast cuda): float32 and bfloat16 are supported, got {x.dtype}")
        x = x.contiguous()
        out = torch.empty_like(x)
        n = x.numel()
        if n == 0:
            return out
        vec = x.data_ptr() % 16 == 0 and out.data_ptr() % 16 == 0
        units = n // (16 // x.element_size()) if vec else n
        grid = max(1, -(-units // (BLOCK * UNROLL)))
        KERNELS[x.dtype](grid, BLOCK, x, out, n, int(vec))
        return out

"""Row softmax in the fast format for the cuda backend (kbench_env.fastpath.cuda_kernel): a block per row.

A row of up to BLOCK * ITEMS elements is read once into registers (16-byte vector loads when every row start is
16-byte aligned, else one element per load), its maximum and then its exponential sum are reduced over the block
(warp shuffles, then one value per warp in shared memory), and it is written once: one read and one write of
global memory. A longer row takes a two-pass path: an online maximum and rescaled sum per thread, merged over the
block, then a second read (mostly from L2) that writes. float32 and bfloat16 (handled on its bits, rounded to
nearest even on the store); the arithmetic is float32."""

import torch
import torch.nn as nn

from kbench_env.fastpath import cuda_kernel

SOURCE = r"""
constexpr int BLOCK = 512;  // kbench-tune: 128 256 512 1024
constexpr int ITEMS = 32;  // kbench-tune: 8 16 32 64
constexpr int WARPS = BLOCK / 32;

__device__ __forceinline__ float to_f(float v) { return v; }
__device__ __forceinline__ float to_f(unsigned short h) { return __uint_as_float((unsigned)h << 16); }
__device__ __forceinline__ void from_f(float v, float& out) { out = v; }
__device__ __forceinline__ unsigned short bf16_bits(float v) {
    const unsigned u = __float_as_uint(v);
    if ((u & 0x7fffffffu) > 0x7f800000u) return (unsigned short)0x7fc0u;  // NaN
    return (unsigned short)((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);  // round to nearest even
}
__device__ __forceinline__ void from_f(float v, unsigned short& out) { out = bf16_bits(v); }

// Element i of a vector of VEC elements: VEC 1 is one element, otherwise 16 bytes (4 float32 or 8 bfloat16).
template <typename S, int VEC>
__device__ __forceinline__ void load_vec(const S* p, long long i, float (&v)[VEC]) {
    if constexpr (VEC == 1) {
        v[0] = to_f(p[i]);
    } else {
        static_assert(VEC * sizeof(S) == 16, "a vector is 16 bytes");
        const uint4 u = reinterpret_cast<const uint4*>(p)[i];
        const unsigned w[4] = {u.x, u.y, u.z, u.w};
#pragma unroll
        for (int j = 0; j < 4; ++j) {
            if constexpr (sizeof(S) == 4) {
                v[j] = __uint_as_float(w[j]);
            } else {
                v[2 * j] = __uint_as_float(w[j] << 16);
                v[2 * j + 1] = __uint_as_float(w[j] & 0xffff0000u);
            }
        }
    }
}

template <typename S, int VEC>
__device__ __forceinline__ void store_vec(S* p, long long i, const float (&v)[VEC]) {
    if constexpr (VEC == 1) {
        from_f(v[0], p[i]);
    } else {
        unsigned w[4];
#pragma unroll
        for (int j = 0; j < 4; ++j) {
            if constexpr (sizeof(S) == 4) w[j] = __float_as_uint(v[j]);
            else w[j] = (unsigned)bf16_bits(v[2 * j]) | ((unsigned)bf16_bits(v[2 * j + 1]) << 16);
        }
        reinterpret_cast<uint4*>(p)[i] = make_uint4(w[0], w[1], w[2], w[3]);
    }
}

// The block's maximum (MAX) or sum of v; every thread gets it. Ends with a barrier, so the next call may reuse red.
template <bool MAX>
__device__ __forceinline__ float block_reduce(float v) {
    __shared__ float red[32];
    const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) {
        const float u = __shfl_xor_sync(0xffffffffu, v, o);
        v = MAX ? fmaxf(v, u) : v + u;
    }
    if (lane == 0) red[warp] = v;
    __syncthreads();
    v = lane < WARPS ? red[lane] : (MAX ? -INFINITY : 0.f);
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) {
        const float u = __shfl_xor_sync(0xffffffffu, v, o);
        v = MAX ? fmaxf(v, u) : v + u;
    }
    __syncthreads();
    return v;
}

// The row held in registers: thread t holds vectors t, t + BLOCK, ... (C <= BLOCK * ITEMS; C % VEC == 0).
template <typename S, int VEC>
__device__ __forceinline__ void softmax_regs(const S* __restrict__ xr, S* __restrict__ yr, long long C) {
    constexpr int MAXV = ITEMS / VEC > 0 ? ITEMS / VEC : 1;
    const long long nv = C / VEC;
    float v[MAXV][VEC];
    float m = -INFINITY;
#pragma unroll
    for (int k = 0; k < MAXV; ++k) {
        const long long i = threadIdx.x + (long long)k * BLOCK;
        if (i < nv) {
            load_vec<S, VEC>(xr, i, v[k]);
#pragma unroll
            for (int j = 0; j < VEC; ++j) m = fmaxf(m, v[k][j]);
        }
    }
    m = block_reduce<true>(m);
    float s = 0.f;
#pragma unroll
    for (int k = 0; k < MAXV; ++k) {
        if (threadIdx.x + (long long)k * BLOCK < nv) {
#pragma unroll
            for (int j = 0; j < VEC; ++j) {
                v[k][j] = __expf(v[k][j] - m);
                s += v[k][j];
            }
        }
    }
    const float inv = 1.0f / block_reduce<false>(s);
#pragma unroll
    for (int k = 0; k < MAXV; ++k) {
        const long long i = threadIdx.x + (long long)k * BLOCK;
        if (i < nv) {
#pragma unroll
            for (int j = 0; j < VEC; ++j) v[k][j] *= inv;
            store_vec<S, VEC>(yr, i, v[k]);
        }
    }
}

// (m, s) <- the merge of two partial (maximum, sum of exp(x - maximum)).
__device__ __forceinline__ void lse_merge(float& m, float& s, float m2, float s2) {
    const float mx = fmaxf(m, m2);
    if (mx == -INFINITY) return;
    s = s * __expf(m - mx) + s2 * __expf(m2 - mx);
    m = mx;
}

// Any row length: an online maximum and sum per thread, merged over the block, then a second read that writes.
template <typename S>
__device__ __forceinline__ void softmax_loop(const S* __restrict__ xr, S* __restrict__ yr, long long C) {
    __shared__ float wm[32], ws[32];
    const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
    float m = -INFINITY, s = 0.f;
    for (long long i = threadIdx.x; i < C; i += BLOCK) {
        const float v = to_f(xr[i]);
        if (v > m) { s = (m == -INFINITY ? 0.f : s * __expf(m - v)) + 1.f; m = v; }
        else if (m != -INFINITY) s += __expf(v - m);  // -inf before any finite value adds nothing
    }
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) {
        const float m2 = __shfl_xor_sync(0xffffffffu, m, o), s2 = __shfl_xor_sync(0xffffffffu, s, o);
        lse_merge(m, s, m2, s2);
    }
    if (lane == 0) { wm[warp] = m; ws[warp] = s; }
    __syncthreads();
    m = wm[0]; s = ws[0];
    for (int w = 1; w < WARPS; ++w) lse_merge(m, s, wm[w], ws[w]);
    const float inv = 1.0f / s;
    for (long long i = threadIdx.x; i < C; i += BLOCK) from_f(__expf(to_f(xr[i]) - m) * inv, yr[i]);
}

// mode 0: registers, one element per load; 1: registers, 16-byte vectors; 2: two passes (any length).
template <typename S>
__device__ __forceinline__ void softmax_row(const S* __restrict__ x, S* __restrict__ y, long long C, long long mode) {
    const long long off = (long long)blockIdx.x * C;
    if (mode == 1) softmax_regs<S, 16 / sizeof(S)>(x + off, y + off, C);
    else if (mode == 0) softmax_regs<S, 1>(x + off, y + off, C);
    else softmax_loop<S>(x + off, y + off, C);
}

extern "C" __global__ void __launch_bounds__(BLOCK) softmax_f32(const float* __restrict__ x, float* __restrict__ y,
                                                                long long C, long long mode) {
    softmax_row<float>(x, y, C, mode);
}

extern "C" __global__ void __launch_bounds__(BLOCK) softmax_bf16(const unsigned short* __restrict__ x,
                                                                 unsigned short* __restrict__ y, long long C,
                                                                 long long mode) {
    softmax_row<unsigned short>(x, y, C, mode);
}
"""


def _tuned(name: str) -> int:
    """The value of the source's ``constexpr int NAME`` (the launch must match what the kernel was built with)."""
    return int(SOURCE.split(f"constexpr int {name} = ", 1)[1].split(";", 1)[0])


BLOCK, ITEMS = _tuned("BLOCK"), _tuned("ITEMS")
KERNELS = {torch.float32: cuda_kernel(SOURCE, "softmax_f32"), torch.bfloat16: cuda_kernel(SOURCE, "softmax_bf16")}


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if x.dim() != 2 or x.dtype not in KERNELS:
            raise TypeError(f"softmax_rows (fast cuda): a 2-D float32 or bfloat16 tensor is expected, got "
                            f"{tuple(x.shape)} {x.dtype}")
        x = x.contiguous()
        y = torch.empty_like(x)
        rows, C = x.shape
        if rows == 0 or C == 0:
            return y
        per = 16 // x.element_size()
        if C > BLOCK * ITEMS:
            mode = 2
        elif C % per == 0 and x.data_ptr() % 16 == 0 and y.data_ptr() % 16 == 0:
            mode = 1
        else:
            mode = 0
        KERNELS[x.dtype](rows, BLOCK, x, y, C, mode)
        return y

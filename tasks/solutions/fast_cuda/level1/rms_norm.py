"""RMS normalisation in the fast format for the cuda backend (kbench_env.fastpath.cuda_kernel), fused into one
kernel where eager PyTorch runs five (square, mean, add, rsqrt, two products): a block per row of the hidden
dimension. A row of up to BLOCK * ITEMS elements is read once into registers (16-byte vector loads when the rows and
the weight are 16-byte aligned, else one element per load), its sum of squares reduced over the block (warp
shuffles, then one value per warp in shared memory), and y = x * rsqrt(mean(x^2) + eps) * weight written once. A
longer row is read a second time (mostly from L2). float32 and bfloat16 (handled on its bits, rounded to nearest
even on the store); the arithmetic is float32."""

import torch
import torch.nn as nn

from kbench_env.fastpath import cuda_kernel

SOURCE = r"""
constexpr int BLOCK = 512;  // kbench-tune: 128 256 512 1024
constexpr int ITEMS = 16;  // kbench-tune: 8 16 32 64
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

// The row held in registers: thread t holds vectors t, t + BLOCK, ... (H <= BLOCK * ITEMS; H % VEC == 0).
template <typename S, int VEC>
__device__ __forceinline__ void rms_regs(const S* __restrict__ xr, const S* __restrict__ w, S* __restrict__ yr,
                                         long long H, float eps) {
    constexpr int MAXV = ITEMS / VEC > 0 ? ITEMS / VEC : 1;
    const long long nv = H / VEC;
    float v[MAXV][VEC];
    float q = 0.f;
#pragma unroll
    for (int k = 0; k < MAXV; ++k) {
        const long long i = threadIdx.x + (long long)k * BLOCK;
        if (i < nv) {
            load_vec<S, VEC>(xr, i, v[k]);
#pragma unroll
            for (int j = 0; j < VEC; ++j) q += v[k][j] * v[k][j];
        }
    }
    const float scale = rsqrtf(block_reduce<false>(q) / (float)H + eps);
#pragma unroll
    for (int k = 0; k < MAXV; ++k) {
        const long long i = threadIdx.x + (long long)k * BLOCK;
        if (i < nv) {
            float g[VEC];
            load_vec<S, VEC>(w, i, g);
#pragma unroll
            for (int j = 0; j < VEC; ++j) v[k][j] = v[k][j] * scale * g[j];
            store_vec<S, VEC>(yr, i, v[k]);
        }
    }
}

// Any row length: the sum of squares over the block, then a second read (mostly from L2) that writes.
template <typename S>
__device__ __forceinline__ void rms_loop(const S* __restrict__ xr, const S* __restrict__ w, S* __restrict__ yr,
                                         long long H, float eps) {
    float q = 0.f;
    for (long long i = threadIdx.x; i < H; i += BLOCK) {
        const float v = to_f(xr[i]);
        q += v * v;
    }
    const float scale = rsqrtf(block_reduce<false>(q) / (float)H + eps);
    for (long long i = threadIdx.x; i < H; i += BLOCK) from_f(to_f(xr[i]) * scale * to_f(w[i]), yr[i]);
}

// mode 0: registers, one element per load; 1: registers, 16-byte vectors; 2: two passes (any length).
template <typename S>
__device__ __forceinline__ void rms_row(const S* __restrict__ x, const S* __restrict__ w, S* __restrict__ y,
                                        long long H, float eps, long long mode) {
    const long long off = (long long)blockIdx.x * H;
    if (mode == 1) rms_regs<S, 16 / sizeof(S)>(x + off, w, y + off, H, eps);
    else if (mode == 0) rms_regs<S, 1>(x + off, w, y + off, H, eps);
    else rms_loop<S>(x + off, w, y + off, H, eps);
}

extern "C" __global__ void __launch_bounds__(BLOCK) rms_norm_f32(const float* __restrict__ x,
        const float* __restrict__ w, float* __restrict__ y, long long H, float eps, long long mode) {
    rms_row<float>(x, w, y, H, eps, mode);
}

extern "C" __global__ void __launch_bounds__(BLOCK) rms_norm_bf16(const unsigned short* __restrict__ x,
        const unsigned short* __restrict__ w, unsigned short* __restrict__ y, long long H, float eps, long long mode) {
    rms_row<unsigned short>(x, w, y, H, eps, mode);
}
"""


def _tuned(name: str) -> int:
    """The value of the source's ``constexpr int NAME`` (the launch must match what the kernel was built with)."""
    return int(SOURCE.split(f"constexpr int {name} = ", 1)[1].split(";", 1)[0])


BLOCK, ITEMS = _tuned("BLOCK"), _tuned("ITEMS")
KERNELS = {torch.float32: cuda_kernel(SOURCE, "rms_norm_f32"), torch.bfloat16: cuda_kernel(SOURCE, "rms_norm_bf16")}


class ModelNew(nn.Module):
    def __init__(self, hidden: int, eps: float = 1e-6):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(1.0 + 0.5 * torch.randn(hidden))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        w = self.weight
        if x.dtype not in KERNELS or w.dtype != x.dtype or x.dim() == 0 or x.shape[-1] != w.numel():
            raise TypeError(f"rms_norm (fast cuda): float32 or bfloat16 input whose last dimension is the weight's "
                            f"({w.numel()}, {w.dtype}) is expected, got {tuple(x.shape)} {x.dtype}")
        x, w = x.contiguous(), w.contiguous()
        y = torch.empty_like(x)
        H = x.shape[-1]
        rows = x.numel() // H if H else 0
        if rows == 0:
            return y
        per = 16 // x.element_size()
        if H > BLOCK * ITEMS:
            mode = 2
        elif H % per == 0 and x.data_ptr() % 16 == 0 and y.data_ptr() % 16 == 0 and w.data_ptr() % 16 == 0:
            mode = 1
        else:
            mode = 0
        KERNELS[x.dtype](rows, BLOCK, x, w, y, H, float(self.eps), mode)
        return y

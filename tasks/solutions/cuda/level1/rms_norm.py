"""RMS normalisation as one fused CUDA kernel (cuda backend sample solution, KernelBench format: load_inline),
where eager PyTorch runs five (square, mean, add, rsqrt, two products): a block per row of the hidden dimension.
A row of up to BLOCK * ITEMS elements is read once into registers (16-byte vector loads when the rows and the
weight are 16-byte aligned, else one element per load), its sum of squares reduced over the block (warp shuffles,
then one value per warp in shared memory), and y = x * rsqrt(mean(x^2) + eps) * weight written once; a longer row
is read a second time (mostly from L2). float32 and bfloat16 (handled on its bits, rounded to nearest even on the
store); the arithmetic is float32. The fast-format version is tasks/solutions/fast_cuda/level1/rms_norm.py."""

import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cuda_source = r"""
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAGuard.h>

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

template <typename S>
__global__ void __launch_bounds__(BLOCK) rms_norm_kernel(const S* __restrict__ x, const S* __restrict__ w,
                                                         S* __restrict__ y, long long H, float eps, long long mode) {
    rms_row<S>(x, w, y, H, eps, mode);
}

template <typename S>
static void launch(const torch::Tensor& x, const torch::Tensor& w, torch::Tensor& y, int64_t rows, int64_t H,
                   float eps, long long mode, cudaStream_t stream) {
    rms_norm_kernel<S><<<(unsigned)rows, BLOCK, 0, stream>>>(static_cast<const S*>(x.data_ptr()),
        static_cast<const S*>(w.data_ptr()), static_cast<S*>(y.data_ptr()), H, eps, mode);
    C10_CUDA_KERNEL_LAUNCH_CHECK();
}

torch::Tensor rms_norm_forward(torch::Tensor x, torch::Tensor w, double eps) {
    TORCH_CHECK(x.is_cuda() && w.is_cuda(), "rms_norm_forward: CUDA tensors expected");
    TORCH_CHECK(x.dim() >= 1 && w.numel() == x.size(-1), "rms_norm_forward: the weight must match the last dimension");
    TORCH_CHECK(x.scalar_type() == w.scalar_type() &&
                (x.scalar_type() == at::kFloat || x.scalar_type() == at::kBFloat16),
                "rms_norm_forward: float32 or bfloat16 input and weight of one dtype expected, got ",
                x.scalar_type(), " and ", w.scalar_type());
    const at::cuda::OptionalCUDAGuard guard(x.device());
    auto xc = x.contiguous();
    auto wc = w.contiguous();
    auto y = torch::empty_like(xc);
    const int64_t H = xc.size(-1), rows = H ? xc.numel() / H : 0;
    if (rows == 0) return y;
    const int64_t per = 16 / xc.element_size();
    const auto aligned = [](const torch::Tensor& t) { return reinterpret_cast<uintptr_t>(t.data_ptr()) % 16 == 0; };
    long long mode = 0;  // registers, one element per load
    if (H > (int64_t)BLOCK * ITEMS) mode = 2;  // two passes
    else if (H % per == 0 && aligned(xc) && aligned(wc) && aligned(y)) mode = 1;  // registers, 16-byte vectors
    cudaStream_t stream = at::cuda::getCurrentCUDAStream();
    if (xc.scalar_type() == at::kFloat) launch<float>(xc, wc, y, rows, H, (float)eps, mode, stream);
    else launch<unsigned short>(xc, wc, y, rows, H, (float)eps, mode, stream);  // bfloat16 as its bits
    return y;
}
"""

cpp_source = "torch::Tensor rms_norm_forward(torch::Tensor x, torch::Tensor w, double eps);"

ext = load_inline(name="kb_cuda_rms_norm", cpp_sources=cpp_source, cuda_sources=cuda_source,
                  functions=["rms_norm_forward"], extra_cuda_cflags=["-O3"])


class ModelNew(nn.Module):
    def __init__(self, hidden: int, eps: float = 1e-6):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(1.0 + 0.5 * torch.randn(hidden))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return ext.rms_norm_forward(x, self.weight, self.eps)

"""LayerNorm candidate (CUDA): the row held in registers (up to 24 values a thread, the count picked from the
hidden size), mean and variance from the registers with shfl_down reductions; hidden sizes past the register
tile fall back to a three-sweep kernel; block=256."""

import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cuda_source = r"""
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAGuard.h>

constexpr int BLOCK = 256;

__device__ __forceinline__ float wsum(float v) {
    for (int o = 16; o; o >>= 1) v += __shfl_down_sync(0xffffffffu, v, o);
    return __shfl_sync(0xffffffffu, v, 0);
}
__device__ float bsum(float v, float* shm) {
    v = wsum(v);
    if ((threadIdx.x & 31) == 0) shm[threadIdx.x >> 5] = v;
    __syncthreads();
    float t = 0.f;
    for (int k = 0; k < BLOCK / 32; ++k) t += shm[k];
    __syncthreads();
    return t;
}

template <typename T, int ITEMS>
__global__ void __launch_bounds__(BLOCK) ln_regs(const T* __restrict__ x, const T* __restrict__ w,
        const T* __restrict__ b, T* __restrict__ y, int64_t H, float eps) {
    __shared__ float shm[BLOCK / 32];
    const T* xr = x + (int64_t)blockIdx.x * H;
    T* yr = y + (int64_t)blockIdx.x * H;
    float v[ITEMS];
    float s = 0.f;
#pragma unroll
    for (int k = 0; k < ITEMS; ++k) {
        const int64_t i = threadIdx.x + (int64_t)k * BLOCK;
        v[k] = i < H ? static_cast<float>(xr[i]) : 0.f;
        s += v[k];
    }
    const float mean = bsum(s, shm) / (float)H;
    float q = 0.f;
#pragma unroll
    for (int k = 0; k < ITEMS; ++k) {
        const int64_t i = threadIdx.x + (int64_t)k * BLOCK;
        const float d = i < H ? v[k] - mean : 0.f;
        q += d * d;
    }
    const float rstd = rsqrtf(bsum(q, shm) / (float)H + eps);
#pragma unroll
    for (int k = 0; k < ITEMS; ++k) {
        const int64_t i = threadIdx.x + (int64_t)k * BLOCK;
        if (i < H) yr[i] = static_cast<T>((v[k] - mean) * rstd * static_cast<float>(w[i]) + static_cast<float>(b[i]));
    }
}

template <typename T>
__global__ void __launch_bounds__(BLOCK) ln_sweeps(const T* __restrict__ x, const T* __restrict__ w,
        const T* __restrict__ b, T* __restrict__ y, int64_t H, float eps) {
    __shared__ float shm[BLOCK / 32];
    const T* xr = x + (int64_t)blockIdx.x * H;
    T* yr = y + (int64_t)blockIdx.x * H;
    float s = 0.f;
    for (int64_t i = threadIdx.x; i < H; i += BLOCK) s += static_cast<float>(xr[i]);
    const float mean = bsum(s, shm) / (float)H;
    float q = 0.f;
    for (int64_t i = threadIdx.x; i < H; i += BLOCK) { const float d = static_cast<float>(xr[i]) - mean; q += d * d; }
    const float rstd = rsqrtf(bsum(q, shm) / (float)H + eps);
    for (int64_t i = threadIdx.x; i < H; i += BLOCK)
        yr[i] = static_cast<T>((static_cast<float>(xr[i]) - mean) * rstd * static_cast<float>(w[i]) + static_cast<float>(b[i]));
}

torch::Tensor layernorm_forward(torch::Tensor x, torch::Tensor w, torch::Tensor b, double eps) {
    TORCH_CHECK(x.is_cuda() && w.is_cuda() && b.is_cuda(), "layernorm_forward: CUDA tensors expected");
    TORCH_CHECK(x.dim() >= 1 && w.numel() == x.size(-1) && b.numel() == x.size(-1),
                "layernorm_forward: weight and bias must match the last dimension");
    const at::cuda::OptionalCUDAGuard guard(x.device());
    auto xc = x.contiguous();
    auto wc = w.contiguous().to(x.scalar_type()), bc = b.contiguous().to(x.scalar_type());
    auto y = torch::empty_like(xc);
    const int64_t H = xc.size(-1), rows = H ? xc.numel() / H : 0;
    if (rows == 0 || H == 0) return y;
    cudaStream_t stream = at::cuda::getCurrentCUDAStream();
    const int sms = at::cuda::getCurrentDeviceProperties()->multiProcessorCount;
    AT_DISPATCH_FLOATING_TYPES_AND2(at::ScalarType::Half, at::ScalarType::BFloat16, xc.scalar_type(), "ln", [&] {
        const scalar_t* xp = xc.data_ptr<scalar_t>();
        const scalar_t* wp = wc.data_ptr<scalar_t>();
        const scalar_t* bp = bc.data_ptr<scalar_t>();
        scalar_t* yp = y.data_ptr<scalar_t>();
        (void)sms;
        TORCH_CHECK(rows <= 2147483647LL, "layernorm_forward: too many rows");
        const unsigned grid = (unsigned)rows;
        if (H <= BLOCK * 2) ln_regs<scalar_t, 2><<<grid, BLOCK, 0, stream>>>(xp, wp, bp, yp, H, (float)eps);
        else if (H <= BLOCK * 8) ln_regs<scalar_t, 8><<<grid, BLOCK, 0, stream>>>(xp, wp, bp, yp, H, (float)eps);
        else if (H <= BLOCK * 24) ln_regs<scalar_t, 24><<<grid, BLOCK, 0, stream>>>(xp, wp, bp, yp, H, (float)eps);
        else ln_sweeps<scalar_t><<<grid, BLOCK, 0, stream>>>(xp, wp, bp, yp, H, (float)eps);
    });
    C10_CUDA_KERNEL_LAUNCH_CHECK();
    return y;
}
"""

cpp_source = "torch::Tensor layernorm_forward(torch::Tensor x, torch::Tensor w, torch::Tensor b, double eps);"

ext = load_inline(name="kbr_layer_norm_register_cached", cpp_sources=cpp_source, cuda_sources=cuda_source,
                  functions=["layernorm_forward"], extra_cuda_cflags=["-O3"])


class ModelNew(nn.Module):
    def __init__(self, hidden: int, eps: float = 1e-5):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(1.0 + 0.5 * torch.randn(hidden))
        self.bias = nn.Parameter(0.5 * torch.randn(hidden))

    def forward(self, x):
        return ext.layernorm_forward(x, self.weight, self.bias, self.eps)

"""RMSNorm candidate (CUDA): the row held in registers (4, 16 or 32 values a thread of a 256-thread block, by
hidden size), read once; shfl_down reductions; longer rows fall back to two sweeps from global memory."""

import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cuda_source = r"""
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAGuard.h>

constexpr int BLOCK = 256;

__device__ float bsum(float v, float* shm) {
    for (int o = 16; o; o >>= 1) v += __shfl_down_sync(0xffffffffu, v, o);
    if ((threadIdx.x & 31) == 0) shm[threadIdx.x >> 5] = v;
    __syncthreads();
    float t = 0.f;
    for (int k = 0; k < BLOCK / 32; ++k) t += shm[k];
    __syncthreads();
    return t;
}

template <typename T, int ITEMS>
__global__ void __launch_bounds__(BLOCK) rms_regs(const T* __restrict__ x, const T* __restrict__ w, T* __restrict__ y,
                                                  int64_t H, float eps) {
    __shared__ float shm[BLOCK / 32];
    const T* xr = x + (int64_t)blockIdx.x * H;
    T* yr = y + (int64_t)blockIdx.x * H;
    float v[ITEMS];
    float q = 0.f;
#pragma unroll
    for (int k = 0; k < ITEMS; ++k) {
        const int64_t i = threadIdx.x + (int64_t)k * BLOCK;
        v[k] = i < H ? static_cast<float>(xr[i]) : 0.f;
        q += v[k] * v[k];
    }
    const float s = rsqrtf(bsum(q, shm) / (float)H + eps);
#pragma unroll
    for (int k = 0; k < ITEMS; ++k) {
        const int64_t i = threadIdx.x + (int64_t)k * BLOCK;
        if (i < H) yr[i] = static_cast<T>(v[k] * s * static_cast<float>(w[i]));
    }
}

template <typename T>
__global__ void __launch_bounds__(BLOCK) rms_sweeps(const T* __restrict__ x, const T* __restrict__ w, T* __restrict__ y,
                                                    int64_t H, float eps) {
    __shared__ float shm[BLOCK / 32];
    const T* xr = x + (int64_t)blockIdx.x * H;
    T* yr = y + (int64_t)blockIdx.x * H;
    float q = 0.f;
    for (int64_t i = threadIdx.x; i < H; i += BLOCK) { const float v = static_cast<float>(xr[i]); q += v * v; }
    const float s = rsqrtf(bsum(q, shm) / (float)H + eps);
    for (int64_t i = threadIdx.x; i < H; i += BLOCK) yr[i] = static_cast<T>(static_cast<float>(xr[i]) * s * static_cast<float>(w[i]));
}

torch::Tensor rmsnorm_forward(torch::Tensor x, torch::Tensor w, double eps) {
    TORCH_CHECK(x.is_cuda() && w.is_cuda(), "rmsnorm_forward: CUDA tensors expected");
    TORCH_CHECK(x.dim() >= 1 && w.numel() == x.size(-1), "rmsnorm_forward: weight must match the last dimension");
    const at::cuda::OptionalCUDAGuard guard(x.device());
    auto xc = x.contiguous();
    auto wc = w.contiguous().to(x.scalar_type());
    auto y = torch::empty_like(xc);
    const int64_t H = xc.size(-1), rows = H ? xc.numel() / H : 0;
    if (rows == 0 || H == 0) return y;
    cudaStream_t stream = at::cuda::getCurrentCUDAStream();
    const int sms = at::cuda::getCurrentDeviceProperties()->multiProcessorCount;
    AT_DISPATCH_FLOATING_TYPES_AND2(at::ScalarType::Half, at::ScalarType::BFloat16, xc.scalar_type(), "rms", [&] {
        const scalar_t* xp = xc.data_ptr<scalar_t>();
        const scalar_t* wp = wc.data_ptr<scalar_t>();
        scalar_t* yp = y.data_ptr<scalar_t>();
        (void)sms;
        TORCH_CHECK(rows <= 2147483647LL, "rmsnorm_forward: too many rows");
        const unsigned grid = (unsigned)rows;
        if (H <= BLOCK * 4) rms_regs<scalar_t, 4><<<grid, BLOCK, 0, stream>>>(xp, wp, yp, H, (float)eps);
        else if (H <= BLOCK * 16) rms_regs<scalar_t, 16><<<grid, BLOCK, 0, stream>>>(xp, wp, yp, H, (float)eps);
        else if (H <= BLOCK * 32) rms_regs<scalar_t, 32><<<grid, BLOCK, 0, stream>>>(xp, wp, yp, H, (float)eps);
        else rms_sweeps<scalar_t><<<grid, BLOCK, 0, stream>>>(xp, wp, yp, H, (float)eps);
    });
    C10_CUDA_KERNEL_LAUNCH_CHECK();
    return y;
}
"""

cpp_source = "torch::Tensor rmsnorm_forward(torch::Tensor x, torch::Tensor w, double eps);"

ext = load_inline(name="kbr_rmsnorm_forward_register_cached", cpp_sources=cpp_source, cuda_sources=cuda_source,
                  functions=["rmsnorm_forward"], extra_cuda_cflags=["-O3"])


class ModelNew(nn.Module):
    def __init__(self, hidden: int, eps: float = 1e-6):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(1.0 + 0.5 * torch.randn(hidden))

    def forward(self, x):
        return ext.rmsnorm_forward(x, self.weight, self.eps)

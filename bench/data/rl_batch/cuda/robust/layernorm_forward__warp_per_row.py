"""LayerNorm candidate (CUDA): one warp per row (4 rows per block, grid-stride), exact two-pass mean and variance
re-read from global memory, warp shuffles only; wpb=4."""

import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cuda_source = r"""
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAGuard.h>

constexpr int WPB = 4;  // warps (rows) per block

__device__ __forceinline__ float wsum(float v) {
    for (int o = 16; o; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}

template <typename T>
__global__ void __launch_bounds__(WPB * 32) ln_warp(const T* __restrict__ x, const T* __restrict__ w,
        const T* __restrict__ b, T* __restrict__ y, int64_t rows, int64_t H, float eps) {
    const int lane = threadIdx.x & 31;
    for (int64_t r = (int64_t)blockIdx.x * WPB + (threadIdx.x >> 5); r < rows; r += (int64_t)gridDim.x * WPB) {
        const T* xr = x + r * H;
        T* yr = y + r * H;
        float s = 0.f;
        for (int64_t i = lane; i < H; i += 32) s += static_cast<float>(xr[i]);
        const float mean = wsum(s) / (float)H;
        float q = 0.f;
        for (int64_t i = lane; i < H; i += 32) { const float d = static_cast<float>(xr[i]) - mean; q += d * d; }
        const float rstd = rsqrtf(wsum(q) / (float)H + eps);
        for (int64_t i = lane; i < H; i += 32)
            yr[i] = static_cast<T>((static_cast<float>(xr[i]) - mean) * rstd * static_cast<float>(w[i]) + static_cast<float>(b[i]));
    }
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
        const int grid = (int)std::min<int64_t>((rows + WPB - 1) / WPB, (int64_t)sms * 16);
        ln_warp<scalar_t><<<grid, WPB * 32, 0, stream>>>(xp, wp, bp, yp, rows, H, (float)eps);
    });
    C10_CUDA_KERNEL_LAUNCH_CHECK();
    return y;
}
"""

cpp_source = "torch::Tensor layernorm_forward(torch::Tensor x, torch::Tensor w, torch::Tensor b, double eps);"

ext = load_inline(name="kbr_layernorm_forward_warp_per_row", cpp_sources=cpp_source, cuda_sources=cuda_source,
                  functions=["layernorm_forward"], extra_cuda_cflags=["-O3"])


class ModelNew(nn.Module):
    def __init__(self, hidden: int, eps: float = 1e-5):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(1.0 + 0.5 * torch.randn(hidden))
        self.bias = nn.Parameter(0.5 * torch.randn(hidden))

    def forward(self, x):
        return ext.layernorm_forward(x, self.weight, self.bias, self.eps)

"""RMSNorm candidate (CUDA): a 256-thread block per row, the sum of squares accumulated in double per thread and
reduced by a double shared-memory halving tree; the scale computed in double."""

import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cuda_source = r"""
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAGuard.h>

constexpr int BLOCK = 256;

template <typename T>
__global__ void __launch_bounds__(BLOCK) rms_tree(const T* __restrict__ x, const T* __restrict__ w, T* __restrict__ y,
                                                  int64_t H, double eps) {
    __shared__ double sq[BLOCK];
    const T* xr = x + (int64_t)blockIdx.x * H;
    T* yr = y + (int64_t)blockIdx.x * H;
    double q = 0.0;
    for (int64_t i = threadIdx.x; i < H; i += BLOCK) { const double v = static_cast<float>(xr[i]); q += v * v; }
    sq[threadIdx.x] = q;
    __syncthreads();
    for (int h = BLOCK / 2; h > 0; h >>= 1) {
        if (threadIdx.x < h) sq[threadIdx.x] += sq[threadIdx.x + h];
        __syncthreads();
    }
    const float s = (float)(1.0 / sqrt(sq[0] / (double)H + eps));
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
        rms_tree<scalar_t><<<(unsigned)rows, BLOCK, 0, stream>>>(xp, wp, yp, H, eps);
    });
    C10_CUDA_KERNEL_LAUNCH_CHECK();
    return y;
}
"""

cpp_source = "torch::Tensor rmsnorm_forward(torch::Tensor x, torch::Tensor w, double eps);"

ext = load_inline(name="kbr_rmsnorm_forward_block_tree_double", cpp_sources=cpp_source, cuda_sources=cuda_source,
                  functions=["rmsnorm_forward"], extra_cuda_cflags=["-O3"])


class ModelNew(nn.Module):
    def __init__(self, hidden: int, eps: float = 1e-6):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(1.0 + 0.5 * torch.randn(hidden))

    def forward(self, x):
        return ext.rmsnorm_forward(x, self.weight, self.eps)

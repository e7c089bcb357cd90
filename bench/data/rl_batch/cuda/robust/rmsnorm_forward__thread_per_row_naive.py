"""RMSNorm candidate (CUDA): naive but correct: one thread per row, two serial sweeps of its row (sum of squares
in float32, then the output), 64-thread blocks."""

import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cuda_source = r"""
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAGuard.h>

template <typename T>
__global__ void rms_naive(const T* __restrict__ x, const T* __restrict__ w, T* __restrict__ y, int64_t rows, int64_t H,
                          float eps) {
    const int64_t r = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (r >= rows) return;
    const T* xr = x + r * H;
    T* yr = y + r * H;
    float q = 0.f;
    for (int64_t i = 0; i < H; ++i) { const float v = static_cast<float>(xr[i]); q = fmaf(v, v, q); }
    const float s = 1.f / sqrtf(q / (float)H + eps);
    for (int64_t i = 0; i < H; ++i) yr[i] = static_cast<T>(static_cast<float>(xr[i]) * s * static_cast<float>(w[i]));
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
        rms_naive<scalar_t><<<(unsigned)((rows + 63) / 64), 64, 0, stream>>>(xp, wp, yp, rows, H, (float)eps);
    });
    C10_CUDA_KERNEL_LAUNCH_CHECK();
    return y;
}
"""

cpp_source = "torch::Tensor rmsnorm_forward(torch::Tensor x, torch::Tensor w, double eps);"

ext = load_inline(name="kbr_rmsnorm_forward_thread_per_row_naive", cpp_sources=cpp_source, cuda_sources=cuda_source,
                  functions=["rmsnorm_forward"], extra_cuda_cflags=["-O3"])


class ModelNew(nn.Module):
    def __init__(self, hidden: int, eps: float = 1e-6):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(1.0 + 0.5 * torch.randn(hidden))

    def forward(self, x):
        return ext.rmsnorm_forward(x, self.weight, self.eps)

"""GELU candidate (CUDA): a grid-stride loop that evaluates x * (1 + erf(x/sqrt2)) / 2 in double precision
(slow on purpose: the most accurate naive kernel), rounded once to the output dtype."""

import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cuda_source = r"""
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAGuard.h>

template <typename T>
__global__ void __launch_bounds__(256) gelu_double(const T* __restrict__ x, T* __restrict__ y, int64_t n) {
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x) {
        const double v = static_cast<double>(static_cast<float>(x[i]));
        y[i] = static_cast<T>(static_cast<float>(0.5 * v * (1.0 + erf(v * 0.70710678118654752440))));
    }
}

torch::Tensor gelu_forward(torch::Tensor x) {
    TORCH_CHECK(x.is_cuda(), "gelu_forward: expected a CUDA tensor");
    const at::cuda::OptionalCUDAGuard guard(x.device());
    auto xc = x.contiguous();
    auto y = torch::empty_like(xc);
    const int64_t n = xc.numel();
    if (n == 0) return y;
    const int64_t cap = (int64_t)at::cuda::getCurrentDeviceProperties()->multiProcessorCount * 8;
    const int grid = (int)std::min<int64_t>((n + 255) / 256, cap);
    AT_DISPATCH_FLOATING_TYPES_AND2(at::ScalarType::Half, at::ScalarType::BFloat16, xc.scalar_type(), "gelu_d", [&] {
        gelu_double<scalar_t><<<grid, 256, 0, at::cuda::getCurrentCUDAStream()>>>(xc.data_ptr<scalar_t>(),
                                                                                   y.data_ptr<scalar_t>(), n);
    });
    C10_CUDA_KERNEL_LAUNCH_CHECK();
    return y;
}
"""

cpp_source = "torch::Tensor gelu_forward(torch::Tensor x);"

ext = load_inline(name="kbr_gelu_grid_stride_double", cpp_sources=cpp_source, cuda_sources=cuda_source,
                  functions=["gelu_forward"], extra_cuda_cflags=["-O3"])


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return ext.gelu_forward(x)

"""ReLU candidate (CUDA): instruction-level parallelism, each thread of a 512-thread block loads four elements a
block-width apart before storing any, one 2048-element tile per block."""

import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cuda_source = r"""
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAGuard.h>

constexpr int THREADS = 512;
constexpr int ILP = 4;

template <typename T>
__global__ void __launch_bounds__(THREADS) relu_ilp(const T* __restrict__ x, T* __restrict__ y, int64_t n) {
    const int64_t base = (int64_t)blockIdx.x * THREADS * ILP + threadIdx.x;
    float v[ILP];
#pragma unroll
    for (int k = 0; k < ILP; ++k) {
        const int64_t i = base + (int64_t)k * THREADS;
        v[k] = i < n ? static_cast<float>(x[i]) : 0.f;
    }
#pragma unroll
    for (int k = 0; k < ILP; ++k) {
        const int64_t i = base + (int64_t)k * THREADS;
        if (i < n) y[i] = static_cast<T>(v[k] < 0.f ? 0.f : v[k]);
    }
}

torch::Tensor relu_forward(torch::Tensor x) {
    TORCH_CHECK(x.is_cuda(), "relu_forward: expected a CUDA tensor");
    const at::cuda::OptionalCUDAGuard guard(x.device());
    auto xc = x.contiguous();
    auto y = torch::empty_like(xc);
    const int64_t n = xc.numel();
    if (n == 0) return y;
    const int64_t tiles = (n + THREADS * ILP - 1) / (THREADS * ILP);
    AT_DISPATCH_FLOATING_TYPES_AND2(at::ScalarType::Half, at::ScalarType::BFloat16, xc.scalar_type(), "relu_ilp", [&] {
        relu_ilp<scalar_t><<<(unsigned)tiles, THREADS, 0, at::cuda::getCurrentCUDAStream()>>>(
            xc.data_ptr<scalar_t>(), y.data_ptr<scalar_t>(), n);
    });
    C10_CUDA_KERNEL_LAUNCH_CHECK();
    return y;
}
"""

cpp_source = "torch::Tensor relu_forward(torch::Tensor x);"

ext = load_inline(name="kbr_relu_ilp4", cpp_sources=cpp_source, cuda_sources=cuda_source,
                  functions=["relu_forward"], extra_cuda_cflags=["-O3"])


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return ext.relu_forward(x)

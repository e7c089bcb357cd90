"""ReLU candidate (CUDA): a 2-D launch over (rows, column chunks) that reads a 2-D input through its strides, so a
non-contiguous input is not copied first; other ranks are flattened to rows of the last dimension."""

import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cuda_source = r"""
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAGuard.h>

template <typename T>
__global__ void relu_rows(const T* __restrict__ x, T* __restrict__ y, int64_t rows, int64_t cols,
                          int64_t sr, int64_t sc) {
    const int64_t c = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (c >= cols) return;
    for (int64_t r = blockIdx.y; r < rows; r += gridDim.y) {
        const float v = static_cast<float>(x[r * sr + c * sc]);
        y[r * cols + c] = static_cast<T>(v < 0.f ? 0.f : v);
    }
}

torch::Tensor relu_forward(torch::Tensor x) {
    TORCH_CHECK(x.is_cuda(), "relu_forward: expected a CUDA tensor");
    const at::cuda::OptionalCUDAGuard guard(x.device());
    torch::Tensor x2 = x.dim() == 2 ? x : x.contiguous().view({-1, x.dim() == 0 ? 1 : x.size(-1)});
    const int64_t rows = x2.size(0), cols = x2.size(1);
    auto y = torch::empty({rows, cols}, x2.options().memory_format(at::MemoryFormat::Contiguous));
    if (rows == 0 || cols == 0) return y.view(x.sizes());
    const int threads = 256;
    dim3 grid((unsigned)((cols + threads - 1) / threads), (unsigned)std::min<int64_t>(rows, 65535));
    AT_DISPATCH_FLOATING_TYPES_AND2(at::ScalarType::Half, at::ScalarType::BFloat16, x2.scalar_type(), "relu_rows", [&] {
        relu_rows<scalar_t><<<grid, threads, 0, at::cuda::getCurrentCUDAStream()>>>(
            x2.data_ptr<scalar_t>(), y.data_ptr<scalar_t>(), rows, cols, x2.stride(0), x2.stride(1));
    });
    C10_CUDA_KERNEL_LAUNCH_CHECK();
    return y.view(x.sizes());
}
"""

cpp_source = "torch::Tensor relu_forward(torch::Tensor x);"

ext = load_inline(name="kbr_relu_rows2d_strided", cpp_sources=cpp_source, cuda_sources=cuda_source,
                  functions=["relu_forward"], extra_cuda_cflags=["-O3"])


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return ext.relu_forward(x)

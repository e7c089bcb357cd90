"""Sum over dim 1 candidate (CUDA): one thread per output with Kahan-compensated float32 summation, four rows
loaded per step before they are added."""

import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cuda_source = r"""
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAGuard.h>

// One thread per output with Kahan-compensated float32 summation, the rows unrolled by 4.
template <typename T>
__global__ void sum_kahan(const T* __restrict__ x, T* __restrict__ y, int64_t B, int64_t N, int64_t D) {
    const int64_t o = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (o >= B * D) return;
    const int64_t b = o / D, d = o % D;
    const T* p = x + b * N * D + d;
    float s = 0.f, c = 0.f;
    int64_t n = 0;
    for (; n + 4 <= N; n += 4) {
        const float v[4] = {static_cast<float>(p[n * D]), static_cast<float>(p[(n + 1) * D]),
                            static_cast<float>(p[(n + 2) * D]), static_cast<float>(p[(n + 3) * D])};
#pragma unroll
        for (int k = 0; k < 4; ++k) {
            const float t = v[k] - c;
            const float u = s + t;
            c = (u - s) - t;
            s = u;
        }
    }
    for (; n < N; ++n) {
        const float t = static_cast<float>(p[n * D]) - c;
        const float u = s + t;
        c = (u - s) - t;
        s = u;
    }
    y[o] = static_cast<T>(s);
}

torch::Tensor sum_dim1_forward(torch::Tensor x) {
    TORCH_CHECK(x.is_cuda() && x.dim() == 3, "sum_dim1_forward: a 3-D CUDA tensor is expected");
    const at::cuda::OptionalCUDAGuard guard(x.device());
    auto xc = x.contiguous();
    const int64_t B = xc.size(0), N = xc.size(1), D = xc.size(2);
    auto y = torch::empty({B, 1, D}, xc.options());
    if (B == 0 || D == 0) return y;
    cudaStream_t stream = at::cuda::getCurrentCUDAStream();
    const int64_t outputs = B * D;
    AT_DISPATCH_FLOATING_TYPES_AND2(at::ScalarType::Half, at::ScalarType::BFloat16, xc.scalar_type(), "sum_kahan", [&] {
        sum_kahan<scalar_t><<<(unsigned)((outputs + 255) / 256), 256, 0, stream>>>(xc.data_ptr<scalar_t>(),
                                                                                  y.data_ptr<scalar_t>(), B, N, D);
    });
    C10_CUDA_KERNEL_LAUNCH_CHECK();
    return y;
}
"""

cpp_source = "torch::Tensor sum_dim1_forward(torch::Tensor x);"

ext = load_inline(name="kbr_sum_dim1_kahan_per_output", cpp_sources=cpp_source, cuda_sources=cuda_source,
                  functions=["sum_dim1_forward"], extra_cuda_cflags=["-O3"])


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return ext.sum_dim1_forward(x)

"""Sum over dim 1 candidate (CUDA): each thread owns 4 adjacent columns and walks all of dimension 1 with float4
loads (float32, D % 4 == 0) or four guarded scalar loads otherwise; 64-thread blocks."""

import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cuda_source = r"""
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAGuard.h>

// Each thread owns 4 adjacent columns of one batch entry and walks all N rows (float4 loads for float32 when D is a
// multiple of 4 and the buffer is aligned; a per-element path otherwise).
__global__ void sum_f4(const float4* __restrict__ x, float4* __restrict__ y, int64_t B, int64_t N, int64_t D4) {
    const int64_t t = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (t >= B * D4) return;
    const int64_t b = t / D4, q = t % D4;
    const float4* p = x + b * N * D4 + q;
    float4 s = make_float4(0.f, 0.f, 0.f, 0.f);
    for (int64_t n = 0; n < N; ++n, p += D4) {
        const float4 v = *p;
        s.x += v.x; s.y += v.y; s.z += v.z; s.w += v.w;
    }
    y[t] = s;
}

template <typename T>
__global__ void sum_cols4(const T* __restrict__ x, T* __restrict__ y, int64_t B, int64_t N, int64_t D) {
    const int64_t groups = (D + 3) / 4;
    const int64_t t = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (t >= B * groups) return;
    const int64_t b = t / groups, d0 = (t % groups) * 4;
    float s[4] = {0.f, 0.f, 0.f, 0.f};
    for (int64_t n = 0; n < N; ++n) {
        const T* row = x + (b * N + n) * D;
#pragma unroll
        for (int k = 0; k < 4; ++k)
            if (d0 + k < D) s[k] += static_cast<float>(row[d0 + k]);
    }
#pragma unroll
    for (int k = 0; k < 4; ++k)
        if (d0 + k < D) y[b * D + d0 + k] = static_cast<T>(s[k]);
}

torch::Tensor sum_dim1_forward(torch::Tensor x) {
    TORCH_CHECK(x.is_cuda() && x.dim() == 3, "sum_dim1_forward: a 3-D CUDA tensor is expected");
    const at::cuda::OptionalCUDAGuard guard(x.device());
    auto xc = x.contiguous();
    const int64_t B = xc.size(0), N = xc.size(1), D = xc.size(2);
    auto y = torch::empty({B, 1, D}, xc.options());
    if (B == 0 || D == 0) return y;
    cudaStream_t stream = at::cuda::getCurrentCUDAStream();
    const int threads = 64;
    if (xc.scalar_type() == at::kFloat && D % 4 == 0 && reinterpret_cast<uintptr_t>(xc.data_ptr()) % 16 == 0) {
        const int64_t work = B * (D / 4);
        sum_f4<<<(unsigned)((work + threads - 1) / threads), threads, 0, stream>>>(
            reinterpret_cast<const float4*>(xc.data_ptr<float>()), reinterpret_cast<float4*>(y.data_ptr<float>()), B, N, D / 4);
    } else {
        const int64_t work = B * ((D + 3) / 4);
        AT_DISPATCH_FLOATING_TYPES_AND2(at::ScalarType::Half, at::ScalarType::BFloat16, xc.scalar_type(), "sum_cols4", [&] {
            sum_cols4<scalar_t><<<(unsigned)((work + threads - 1) / threads), threads, 0, stream>>>(
                xc.data_ptr<scalar_t>(), y.data_ptr<scalar_t>(), B, N, D);
        });
    }
    C10_CUDA_KERNEL_LAUNCH_CHECK();
    return y;
}
"""

cpp_source = "torch::Tensor sum_dim1_forward(torch::Tensor x);"

ext = load_inline(name="kbr_sum_dim1_float4_columns", cpp_sources=cpp_source, cuda_sources=cuda_source,
                  functions=["sum_dim1_forward"], extra_cuda_cflags=["-O3"])


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return ext.sum_dim1_forward(x)

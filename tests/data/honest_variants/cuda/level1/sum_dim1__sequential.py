"""Honest variant of level1/sum_dim1 (CUDA): one thread per output, its column summed in order in one float32
accumulator (no tree, no shared memory)."""

import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cuda_source = r"""
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAGuard.h>

__global__ void kbv_sum_dim1_sequential(const float* __restrict__ x, float* __restrict__ y, int64_t B, int64_t N,
        int64_t D) {
    const int64_t o = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;  // output (b, d); adjacent threads, adjacent d
    if (o >= B * D) return;
    const int64_t b = o / D, d = o % D;
    const float* p = x + b * N * D + d;
    float s = 0.f;
    for (int64_t n = 0; n < N; ++n) s += p[n * D];
    y[o] = s;
}

torch::Tensor sum_dim1_forward(torch::Tensor x) {
    TORCH_CHECK(x.is_cuda() && x.dim() == 3 && x.scalar_type() == at::kFloat, "sum_dim1_forward: 3-D float32 CUDA");
    const at::cuda::OptionalCUDAGuard guard(x.device());
    auto xc = x.contiguous();
    const int64_t B = xc.size(0), N = xc.size(1), D = xc.size(2);
    auto y = torch::empty({B, 1, D}, xc.options());
    if (B * D == 0) return y;
    const int threads = 256;
    const int64_t blocks = (B * D + threads - 1) / threads;
    kbv_sum_dim1_sequential<<<(unsigned)blocks, threads, 0, at::cuda::getCurrentCUDAStream()>>>(
        xc.data_ptr<float>(), y.data_ptr<float>(), B, N, D);
    C10_CUDA_KERNEL_LAUNCH_CHECK();
    return y;
}
"""

cpp_source = "torch::Tensor sum_dim1_forward(torch::Tensor x);"

ext = load_inline(name="kbv_cuda_sum_dim1_sequential", cpp_sources=cpp_source, cuda_sources=cuda_source,
                  functions=["sum_dim1_forward"], extra_cuda_cflags=["-O3"])


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return ext.sum_dim1_forward(x)

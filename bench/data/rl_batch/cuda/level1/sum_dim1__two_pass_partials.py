"""Sum over dim 1 candidate (CUDA): two kernels, float32 partial sums over 128-row chunks into a [B, chunks, D]
workspace, then one thread per output adds its chunks in order (deterministic, no atomics)."""

import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cuda_source = r"""
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAGuard.h>

constexpr int TILE_D = 64;   // columns per block
constexpr int CHUNK = 128;   // rows per partial sum

// Kernel 1: partial[b, c, d] = sum over rows [c*CHUNK, (c+1)*CHUNK) of x[b, n, d].
template <typename T>
__global__ void partials(const T* __restrict__ x, float* __restrict__ part, int64_t N, int64_t D, int64_t chunks) {
    const int64_t d = (int64_t)blockIdx.x * TILE_D + threadIdx.x;
    const int64_t c = blockIdx.y, b = blockIdx.z;
    if (d >= D) return;
    float s = 0.f;
    const int64_t n1 = min(N, (c + 1) * CHUNK);
    for (int64_t n = c * CHUNK; n < n1; ++n) s += static_cast<float>(x[(b * N + n) * D + d]);
    part[(b * chunks + c) * D + d] = s;
}

// Kernel 2: one thread per output sums its column of partials in order (deterministic).
template <typename T>
__global__ void finish(const float* __restrict__ part, T* __restrict__ y, int64_t B, int64_t D, int64_t chunks) {
    const int64_t o = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (o >= B * D) return;
    const int64_t b = o / D, d = o % D;
    float s = 0.f;
    for (int64_t c = 0; c < chunks; ++c) s += part[(b * chunks + c) * D + d];
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
    const int64_t chunks = std::max<int64_t>(1, (N + CHUNK - 1) / CHUNK);
    TORCH_CHECK(B < 65536 && chunks < 65536, "sum_dim1_forward: sizes too large for the grid");
    auto part = torch::empty({B, chunks, D}, xc.options().dtype(at::kFloat));
    dim3 g1((unsigned)((D + TILE_D - 1) / TILE_D), (unsigned)chunks, (unsigned)B);
    AT_DISPATCH_FLOATING_TYPES_AND2(at::ScalarType::Half, at::ScalarType::BFloat16, xc.scalar_type(), "sum_two_pass", [&] {
        partials<scalar_t><<<g1, TILE_D, 0, stream>>>(xc.data_ptr<scalar_t>(), part.data_ptr<float>(), N, D, chunks);
        C10_CUDA_KERNEL_LAUNCH_CHECK();
        finish<scalar_t><<<(unsigned)((B * D + 127) / 128), 128, 0, stream>>>(part.data_ptr<float>(), y.data_ptr<scalar_t>(), B, D, chunks);
        C10_CUDA_KERNEL_LAUNCH_CHECK();
    });
    return y;
}
"""

cpp_source = "torch::Tensor sum_dim1_forward(torch::Tensor x);"

ext = load_inline(name="kbr_sum_dim1_two_pass_partials", cpp_sources=cpp_source, cuda_sources=cuda_source,
                  functions=["sum_dim1_forward"], extra_cuda_cflags=["-O3"])


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return ext.sum_dim1_forward(x)

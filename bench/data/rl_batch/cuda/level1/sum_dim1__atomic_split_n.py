"""Sum over dim 1 candidate (CUDA): dimension 1 split into 256-row slices over a 3-D grid, each thread's slice sum
added with atomicAdd into a zeroed float32 buffer, then a cast kernel writes the output dtype."""

import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cuda_source = r"""
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAGuard.h>

constexpr int COLS = 128;   // columns per block (one per thread)
constexpr int SLICE = 256;  // rows of N per block

// Grid (column tiles, N slices, B): each thread sums its column over its slice and adds it atomically to a
// float32 accumulator; a second kernel converts the accumulator to the output dtype.
template <typename T>
__global__ void sum_slices(const T* __restrict__ x, float* __restrict__ acc, int64_t N, int64_t D) {
    const int64_t d = (int64_t)blockIdx.x * COLS + threadIdx.x;
    const int64_t b = blockIdx.z;
    if (d >= D) return;
    const int64_t n0 = (int64_t)blockIdx.y * SLICE, n1 = min(N, n0 + SLICE);
    const T* p = x + (b * N + n0) * D + d;
    float s = 0.f;
    for (int64_t n = n0; n < n1; ++n, p += D) s += static_cast<float>(*p);
    atomicAdd(acc + b * D + d, s);
}

template <typename T>
__global__ void to_output(const float* __restrict__ acc, T* __restrict__ y, int64_t n) {
    const int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = static_cast<T>(acc[i]);
}

torch::Tensor sum_dim1_forward(torch::Tensor x) {
    TORCH_CHECK(x.is_cuda() && x.dim() == 3, "sum_dim1_forward: a 3-D CUDA tensor is expected");
    const at::cuda::OptionalCUDAGuard guard(x.device());
    auto xc = x.contiguous();
    const int64_t B = xc.size(0), N = xc.size(1), D = xc.size(2);
    auto y = torch::empty({B, 1, D}, xc.options());
    if (B == 0 || D == 0) return y;
    cudaStream_t stream = at::cuda::getCurrentCUDAStream();
    TORCH_CHECK(B < 65536, "sum_dim1_forward: batch too large for the grid");
    auto acc = torch::empty({B * D}, xc.options().dtype(at::kFloat));
    C10_CUDA_CHECK(cudaMemsetAsync(acc.data_ptr<float>(), 0, sizeof(float) * B * D, stream));
    const int64_t slices = std::max<int64_t>(1, (N + SLICE - 1) / SLICE);
    TORCH_CHECK(slices < 65536, "sum_dim1_forward: dimension 1 too long for the grid");
    dim3 grid((unsigned)((D + COLS - 1) / COLS), (unsigned)slices, (unsigned)B);
    AT_DISPATCH_FLOATING_TYPES_AND2(at::ScalarType::Half, at::ScalarType::BFloat16, xc.scalar_type(), "sum_slices", [&] {
        if (N > 0) {
            sum_slices<scalar_t><<<grid, COLS, 0, stream>>>(xc.data_ptr<scalar_t>(), acc.data_ptr<float>(), N, D);
            C10_CUDA_KERNEL_LAUNCH_CHECK();
        }
        to_output<scalar_t><<<(unsigned)((B * D + 255) / 256), 256, 0, stream>>>(acc.data_ptr<float>(), y.data_ptr<scalar_t>(), B * D);
        C10_CUDA_KERNEL_LAUNCH_CHECK();
    });
    return y;
}
"""

cpp_source = "torch::Tensor sum_dim1_forward(torch::Tensor x);"

ext = load_inline(name="kbr_sum_dim1_atomic_split_n", cpp_sources=cpp_source, cuda_sources=cuda_source,
                  functions=["sum_dim1_forward"], extra_cuda_cflags=["-O3"])


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return ext.sum_dim1_forward(x)

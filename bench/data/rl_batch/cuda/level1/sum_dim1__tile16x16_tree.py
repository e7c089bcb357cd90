"""Sum over dim 1 candidate (CUDA): 16x16 thread blocks (16 columns x 16 row phases) per (column tile, batch),
the phase sums combined by a shared-memory halving tree over the y dimension."""

import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cuda_source = r"""
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAGuard.h>

constexpr int TX = 16, TY = 16;

// A 16x16 block: threadIdx.x picks one of 16 adjacent columns, threadIdx.y one of 16 row phases; the 16 phase
// sums of each column are combined by a shared-memory halving tree over y. The grid is (column tiles, batch).
template <typename T>
__global__ void __launch_bounds__(TX * TY) sum_tile(const T* __restrict__ x, T* __restrict__ y, int64_t N, int64_t D) {
    __shared__ float s[TY][TX + 1];
    const int64_t d = (int64_t)blockIdx.x * TX + threadIdx.x;
    const int64_t b = blockIdx.y;
    float acc = 0.f;
    if (d < D)
        for (int64_t n = threadIdx.y; n < N; n += TY) acc += static_cast<float>(x[(b * N + n) * D + d]);
    s[threadIdx.y][threadIdx.x] = acc;
    __syncthreads();
    for (int h = TY / 2; h > 0; h >>= 1) {
        if (threadIdx.y < h) s[threadIdx.y][threadIdx.x] += s[threadIdx.y + h][threadIdx.x];
        __syncthreads();
    }
    if (threadIdx.y == 0 && d < D) y[b * D + d] = static_cast<T>(s[0][threadIdx.x]);
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
    dim3 grid((unsigned)((D + TX - 1) / TX), (unsigned)B), block(TX, TY);
    AT_DISPATCH_FLOATING_TYPES_AND2(at::ScalarType::Half, at::ScalarType::BFloat16, xc.scalar_type(), "sum_tile", [&] {
        sum_tile<scalar_t><<<grid, block, 0, stream>>>(xc.data_ptr<scalar_t>(), y.data_ptr<scalar_t>(), N, D);
    });
    C10_CUDA_KERNEL_LAUNCH_CHECK();
    return y;
}
"""

cpp_source = "torch::Tensor sum_dim1_forward(torch::Tensor x);"

ext = load_inline(name="kbr_sum_dim1_tile16x16_tree", cpp_sources=cpp_source, cuda_sources=cuda_source,
                  functions=["sum_dim1_forward"], extra_cuda_cflags=["-O3"])


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return ext.sum_dim1_forward(x)

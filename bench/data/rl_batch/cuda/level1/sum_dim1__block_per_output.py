"""Sum over dim 1 candidate (CUDA): one 128-thread block per output element striding down its column (loads D
apart, uncoalesced), warp-shuffle reduction; grid-stride over outputs."""

import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cuda_source = r"""
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAGuard.h>

constexpr int BLOCK = 128;

// One block per output element (b, d): the block's threads stride down column d of batch b (loads D apart),
// reduced with warp shuffles and a 4-float shared-memory combine.
template <typename T>
__global__ void __launch_bounds__(BLOCK) sum_col_block(const T* __restrict__ x, T* __restrict__ y, int64_t N, int64_t D,
                                                       int64_t outputs) {
    __shared__ float part[BLOCK / 32];
    for (int64_t o = blockIdx.x; o < outputs; o += gridDim.x) {
        const int64_t b = o / D, d = o % D;
        const T* col = x + b * N * D + d;
        float s = 0.f;
        for (int64_t n = threadIdx.x; n < N; n += BLOCK) s += static_cast<float>(col[n * D]);
        for (int off = 16; off; off >>= 1) s += __shfl_xor_sync(0xffffffffu, s, off);
        if ((threadIdx.x & 31) == 0) part[threadIdx.x >> 5] = s;
        __syncthreads();
        if (threadIdx.x == 0) {
            float t = 0.f;
            for (int w = 0; w < BLOCK / 32; ++w) t += part[w];
            y[o] = static_cast<T>(t);
        }
        __syncthreads();
    }
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
    const int grid = (int)std::min<int64_t>(outputs, (int64_t)at::cuda::getCurrentDeviceProperties()->multiProcessorCount * 32);
    AT_DISPATCH_FLOATING_TYPES_AND2(at::ScalarType::Half, at::ScalarType::BFloat16, xc.scalar_type(), "sum_col_block", [&] {
        sum_col_block<scalar_t><<<grid, BLOCK, 0, stream>>>(xc.data_ptr<scalar_t>(), y.data_ptr<scalar_t>(), N, D, outputs);
    });
    C10_CUDA_KERNEL_LAUNCH_CHECK();
    return y;
}
"""

cpp_source = "torch::Tensor sum_dim1_forward(torch::Tensor x);"

ext = load_inline(name="kbr_sum_dim1_block_per_output", cpp_sources=cpp_source, cuda_sources=cuda_source,
                  functions=["sum_dim1_forward"], extra_cuda_cflags=["-O3"])


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return ext.sum_dim1_forward(x)

"""Row cumsum as one CUDA kernel (cuda backend sample solution): a block per row walks it in tiles of
BLOCK * ITEMS elements, loaded coalesced into shared memory; each thread scans ITEMS consecutive elements, warp
shuffles and one warp scan of the warp totals give the block's prefix, and a carry runs from tile to tile. Running
sums are double: a float32 carry over a long row of positive values rounds each term to the carry's spacing."""

import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cuda_source = r"""
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAGuard.h>

inline int kb_grid(int64_t work, int per_sm) {
    const int64_t cap = (int64_t)at::cuda::getCurrentDeviceProperties()->multiProcessorCount * per_sm;
    return (int)std::max<int64_t>(1, std::min<int64_t>(work, cap));
}

constexpr int BLOCK = 512;  // kbench-tune: 256 512 1024
constexpr int ITEMS = 4;    // kbench-tune: 2 4 8
constexpr int TILE = BLOCK * ITEMS;
constexpr int WARPS = BLOCK / 32;

__global__ void __launch_bounds__(BLOCK) kb_cumsum_kernel(const float* __restrict__ x, float* __restrict__ y,
        int64_t rows, int64_t C) {
    __shared__ float tile[TILE];
    __shared__ double warp_total[WARPS];
    const int tid = threadIdx.x, lane = tid % 32, warp = tid / 32;
    for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
        const float* xr = x + r * C;
        float* yr = y + r * C;
        double carry = 0.0;
        for (int64_t t0 = 0; t0 < C; t0 += TILE) {
#pragma unroll
            for (int k = 0; k < ITEMS; ++k) {
                const int64_t i = t0 + k * BLOCK + tid;
                tile[k * BLOCK + tid] = i < C ? xr[i] : 0.f;
            }
            __syncthreads();
            double v[ITEMS], run = 0.0;
#pragma unroll
            for (int k = 0; k < ITEMS; ++k) {
                run += (double)tile[tid * ITEMS + k];
                v[k] = run;
            }
            double incl = run;  // inclusive scan of the thread totals within the warp
#pragma unroll
            for (int o = 1; o < 32; o <<= 1) {
                const double n = __shfl_up_sync(0xffffffffu, incl, o);
                if (lane >= o) incl += n;
            }
            if (lane == 31) warp_total[warp] = incl;
            __syncthreads();
            if (warp == 0) {
                double w = lane < WARPS ? warp_total[lane] : 0.0;
#pragma unroll
                for (int o = 1; o < 32; o <<= 1) {
                    const double n = __shfl_up_sync(0xffffffffu, w, o);
                    if (lane >= o) w += n;
                }
                if (lane < WARPS) warp_total[lane] = w;
            }
            __syncthreads();
            const double before = carry + (warp > 0 ? warp_total[warp - 1] : 0.0) + (incl - run);
#pragma unroll
            for (int k = 0; k < ITEMS; ++k) tile[tid * ITEMS + k] = (float)(before + v[k]);
            carry += warp_total[WARPS - 1];
            __syncthreads();
#pragma unroll
            for (int k = 0; k < ITEMS; ++k) {
                const int64_t i = t0 + k * BLOCK + tid;
                if (i < C) yr[i] = tile[k * BLOCK + tid];
            }
            __syncthreads();  // the tile and the warp totals are reused by the next tile
        }
    }
}

torch::Tensor cumsum_forward(torch::Tensor x) {
    TORCH_CHECK(x.is_cuda() && x.dim() == 2 && x.scalar_type() == at::kFloat,
                "cumsum_forward: a 2-D float32 CUDA tensor is expected (cumsum over dim 1)");
    const at::cuda::OptionalCUDAGuard guard(x.device());
    auto xc = x.contiguous();
    auto y = torch::empty_like(xc);
    const int64_t rows = xc.size(0), C = xc.size(1);
    if (rows == 0 || C == 0) return y;
    cudaStream_t stream = at::cuda::getCurrentCUDAStream();
    kb_cumsum_kernel<<<kb_grid(rows, 4), BLOCK, 0, stream>>>(xc.data_ptr<float>(), y.data_ptr<float>(), rows, C);
    C10_CUDA_KERNEL_LAUNCH_CHECK();
    return y;
}
"""

cpp_source = "torch::Tensor cumsum_forward(torch::Tensor x);"

ext = load_inline(name="kb_cuda_cumsum_positive_rows", cpp_sources=cpp_source, cuda_sources=cuda_source,
                  functions=["cumsum_forward"], extra_cuda_cflags=["-O3"])


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return ext.cumsum_forward(x)

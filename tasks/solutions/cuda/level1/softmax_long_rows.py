"""Row softmax for long rows as one CUDA kernel (cuda backend sample solution): a block per row makes three passes
over it, the row maximum, the sum of exp(x - max) (double per thread and across the block: every term is near 1,
and a row may hold a million of them), and the scaled exponentials."""

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
constexpr int WARPS = BLOCK / 32;

// Combine one value per thread over the block (op: max or sum); every thread gets the result. shm: WARPS slots.
template <typename V, typename Op>
__device__ __forceinline__ V kb_block_reduce(V v, V identity, V* shm, Op op) {
    const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) v = op(v, __shfl_xor_sync(0xffffffffu, v, o));
    __syncthreads();  // shm may still be read from a previous reduction
    if (lane == 0) shm[warp] = v;
    __syncthreads();
    v = lane < WARPS ? shm[lane] : identity;
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) v = op(v, __shfl_xor_sync(0xffffffffu, v, o));
    return v;
}

__global__ void __launch_bounds__(BLOCK) kb_softmax_kernel(const float* __restrict__ x, float* __restrict__ y,
        int64_t rows, int64_t C) {
    __shared__ float shm_max[WARPS];
    __shared__ double shm_sum[WARPS];
    for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
        const float* xr = x + r * C;
        float* yr = y + r * C;
        float m = -INFINITY;
        for (int64_t i = threadIdx.x; i < C; i += BLOCK) m = fmaxf(m, xr[i]);
        m = kb_block_reduce(m, -INFINITY, shm_max, [](float a, float b) { return fmaxf(a, b); });
        double s = 0.0;
        for (int64_t i = threadIdx.x; i < C; i += BLOCK) s += (double)expf(xr[i] - m);
        s = kb_block_reduce(s, 0.0, shm_sum, [](double a, double b) { return a + b; });
        const float inv = (float)(1.0 / s);
        for (int64_t i = threadIdx.x; i < C; i += BLOCK) yr[i] = expf(xr[i] - m) * inv;
    }
}

torch::Tensor softmax_forward(torch::Tensor x) {
    TORCH_CHECK(x.is_cuda() && x.dim() == 2 && x.scalar_type() == at::kFloat,
                "softmax_forward: a 2-D float32 CUDA tensor is expected (softmax over dim 1)");
    const at::cuda::OptionalCUDAGuard guard(x.device());
    auto xc = x.contiguous();
    auto y = torch::empty_like(xc);
    const int64_t rows = xc.size(0), C = xc.size(1);
    if (rows == 0 || C == 0) return y;
    cudaStream_t stream = at::cuda::getCurrentCUDAStream();
    kb_softmax_kernel<<<kb_grid(rows, 4), BLOCK, 0, stream>>>(xc.data_ptr<float>(), y.data_ptr<float>(), rows, C);
    C10_CUDA_KERNEL_LAUNCH_CHECK();
    return y;
}
"""

cpp_source = "torch::Tensor softmax_forward(torch::Tensor x);"

ext = load_inline(name="kb_cuda_softmax_long_rows", cpp_sources=cpp_source, cuda_sources=cuda_source,
                  functions=["softmax_forward"], extra_cuda_cflags=["-O3"])


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return ext.softmax_forward(x)

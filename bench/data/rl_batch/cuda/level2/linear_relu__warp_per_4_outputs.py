"""Linear + ReLU candidate (CUDA): no shared memory: each warp computes 4 adjacent outputs of one row, lanes
striding along k (coalesced reads of the input row and 4 weight rows), warp-shuffle reductions, grid-stride over
warps."""

import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cuda_source = r"""
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAGuard.h>

constexpr int OUTS = 4;

template <typename T>
__global__ void __launch_bounds__(256) linear_warp(const T* __restrict__ x, const T* __restrict__ w,
        const T* __restrict__ b, T* __restrict__ y, int64_t M, int64_t N, int64_t K) {
    const int lane = threadIdx.x & 31;
    const int64_t groups = (N + OUTS - 1) / OUTS;
    const int64_t total = M * groups;
    const int64_t nwarps = ((int64_t)gridDim.x * blockDim.x) >> 5;
    for (int64_t t = ((int64_t)blockIdx.x * blockDim.x + threadIdx.x) >> 5; t < total; t += nwarps) {
        const int64_t m = t / groups, n0 = (t % groups) * OUTS;
        const T* xr = x + m * K;
        float acc[OUTS] = {0.f, 0.f, 0.f, 0.f};
        for (int64_t k = lane; k < K; k += 32) {
            const float xv = static_cast<float>(xr[k]);
#pragma unroll
            for (int j = 0; j < OUTS; ++j)
                if (n0 + j < N) acc[j] = fmaf(xv, static_cast<float>(w[(n0 + j) * K + k]), acc[j]);
        }
#pragma unroll
        for (int j = 0; j < OUTS; ++j)
            for (int o = 16; o; o >>= 1) acc[j] += __shfl_xor_sync(0xffffffffu, acc[j], o);
        if (lane < OUTS && n0 + lane < N) {
            float v = acc[0];
#pragma unroll
            for (int j = 1; j < OUTS; ++j) v = lane == j ? acc[j] : v;
            v += static_cast<float>(b[n0 + lane]);
            y[m * N + n0 + lane] = static_cast<T>(v > 0.f ? v : 0.f);
        }
    }
}

torch::Tensor linear_relu_forward(torch::Tensor x, torch::Tensor w, torch::Tensor b) {
    TORCH_CHECK(x.is_cuda() && w.is_cuda() && b.is_cuda(), "linear_relu_forward: CUDA tensors expected");
    TORCH_CHECK(w.dim() == 2 && x.dim() >= 1 && x.size(-1) == w.size(1) && b.numel() == w.size(0),
                "linear_relu_forward: shapes do not match (x [..., K], weight [N, K], bias [N])");
    const at::cuda::OptionalCUDAGuard guard(x.device());
    const int64_t K = w.size(1), N = w.size(0);
    auto xc = x.contiguous().view({-1, K});
    auto wc = w.contiguous().to(x.scalar_type()), bc = b.contiguous().to(x.scalar_type());
    const int64_t M = xc.size(0);
    auto out = torch::empty({M, N}, xc.options());
    auto shape = x.sizes().vec();
    shape.back() = N;
    if (M == 0 || N == 0) return out.view(shape);
    TORCH_CHECK(M < (1LL << 31) && N < (1LL << 31), "linear_relu_forward: sizes too large");
    cudaStream_t stream = at::cuda::getCurrentCUDAStream();
    const int sms = at::cuda::getCurrentDeviceProperties()->multiProcessorCount;
    AT_DISPATCH_FLOATING_TYPES_AND2(at::ScalarType::Half, at::ScalarType::BFloat16, xc.scalar_type(), "linear_relu", [&] {
        const scalar_t* xp = xc.data_ptr<scalar_t>();
        const scalar_t* wp = wc.data_ptr<scalar_t>();
        const scalar_t* bp = bc.data_ptr<scalar_t>();
        scalar_t* yp = out.data_ptr<scalar_t>();
        (void)sms;
        const int64_t warps = M * ((N + OUTS - 1) / OUTS);
        const int grid = (int)std::max<int64_t>(1, std::min<int64_t>((warps + 7) / 8, (int64_t)sms * 16));
        linear_warp<scalar_t><<<grid, 256, 0, stream>>>(xp, wp, bp, yp, M, N, K);
        C10_CUDA_KERNEL_LAUNCH_CHECK();
    });
    return out.view(shape);
}
"""

cpp_source = "torch::Tensor linear_relu_forward(torch::Tensor x, torch::Tensor w, torch::Tensor b);"

ext = load_inline(name="kbr_linear_relu_warp_per_4_outputs", cpp_sources=cpp_source, cuda_sources=cuda_source,
                  functions=["linear_relu_forward"], extra_cuda_cflags=["-O3"])


class ModelNew(nn.Module):
    def __init__(self, in_features: int, out_features: int):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)

    def forward(self, x):
        return ext.linear_relu_forward(x, self.linear.weight, self.linear.bias)

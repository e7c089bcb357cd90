"""Linear + ReLU candidate (CUDA): 32x32 output tiles with a 32-deep k-step in shared memory, 256 threads each
computing a 2x2 block of outputs 16 apart (register reuse), fused bias and ReLU."""

import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cuda_source = r"""
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAGuard.h>

constexpr int BT = 32, BK = 32;

template <typename T>
__global__ void __launch_bounds__(256) linear_t32(const T* __restrict__ x, const T* __restrict__ w,
        const T* __restrict__ b, T* __restrict__ y, int64_t M, int64_t N, int64_t K) {
    __shared__ float As[BT][BK + 1], Bs[BT][BK + 1];
    const int tx = threadIdx.x % 16, ty = threadIdx.x / 16, tid = threadIdx.x;
    const int64_t m0 = (int64_t)blockIdx.y * BT, n0 = (int64_t)blockIdx.x * BT;
    float acc[2][2] = {{0.f, 0.f}, {0.f, 0.f}};
    for (int64_t k0 = 0; k0 < K; k0 += BK) {
#pragma unroll
        for (int e = tid; e < BT * BK; e += 256) {
            const int r = e / BK, kk = e % BK;
            const int64_t k = k0 + kk;
            As[r][kk] = (m0 + r < M && k < K) ? static_cast<float>(x[(m0 + r) * K + k]) : 0.f;
            Bs[r][kk] = (n0 + r < N && k < K) ? static_cast<float>(w[(n0 + r) * K + k]) : 0.f;
        }
        __syncthreads();
#pragma unroll 8
        for (int kk = 0; kk < BK; ++kk) {
            const float a0 = As[ty][kk], a1 = As[ty + 16][kk];
            const float b0 = Bs[tx][kk], b1 = Bs[tx + 16][kk];
            acc[0][0] = fmaf(a0, b0, acc[0][0]);
            acc[0][1] = fmaf(a0, b1, acc[0][1]);
            acc[1][0] = fmaf(a1, b0, acc[1][0]);
            acc[1][1] = fmaf(a1, b1, acc[1][1]);
        }
        __syncthreads();
    }
#pragma unroll
    for (int i = 0; i < 2; ++i)
#pragma unroll
        for (int j = 0; j < 2; ++j) {
            const int64_t m = m0 + ty + 16 * i, n = n0 + tx + 16 * j;
            if (m < M && n < N) {
                const float v = acc[i][j] + static_cast<float>(b[n]);
                y[m * N + n] = static_cast<T>(v > 0.f ? v : 0.f);
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
        TORCH_CHECK((M + BT - 1) / BT < 65536, "linear_relu_forward: too many rows for the grid");
        dim3 grid((unsigned)((N + BT - 1) / BT), (unsigned)((M + BT - 1) / BT));
        linear_t32<scalar_t><<<grid, 256, 0, stream>>>(xp, wp, bp, yp, M, N, K);
        C10_CUDA_KERNEL_LAUNCH_CHECK();
    });
    return out.view(shape);
}
"""

cpp_source = "torch::Tensor linear_relu_forward(torch::Tensor x, torch::Tensor w, torch::Tensor b);"

ext = load_inline(name="kbr_linear_relu_tile32_2x2", cpp_sources=cpp_source, cuda_sources=cuda_source,
                  functions=["linear_relu_forward"], extra_cuda_cflags=["-O3"])


class ModelNew(nn.Module):
    def __init__(self, in_features: int, out_features: int):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)

    def forward(self, x):
        return ext.linear_relu_forward(x, self.linear.weight, self.linear.bias)

"""Linear + ReLU candidate (CUDA): 64x64 output tiles, 256 threads each a 4x4 register block, 16-deep k-steps
through two shared-memory buffers: the next tile's global loads are issued into registers before the current
tile is used (software pipelining); bias and ReLU fused."""

import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cuda_source = r"""
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAGuard.h>

constexpr int BM = 64, BN = 64, BK = 16;

template <typename T>
__device__ __forceinline__ void fetch(const T* __restrict__ p, int64_t rows_total, int64_t row0, int64_t K, int64_t k0,
                                      int tid, float (&r)[4]) {
#pragma unroll
    for (int i = 0; i < 4; ++i) {
        const int e = tid + i * 256, row = e / BK, kk = e % BK;
        const int64_t gr = row0 + row, k = k0 + kk;
        r[i] = (gr < rows_total && k < K) ? static_cast<float>(p[gr * K + k]) : 0.f;
    }
}

__device__ __forceinline__ void stash(float (*s)[BM + 4], int tid, const float (&r)[4]) {
#pragma unroll
    for (int i = 0; i < 4; ++i) {
        const int e = tid + i * 256;
        s[e % BK][e / BK] = r[i];
    }
}

template <typename T>
__global__ void __launch_bounds__(256) linear_db(const T* __restrict__ x, const T* __restrict__ w,
        const T* __restrict__ b, T* __restrict__ y, int64_t M, int64_t N, int64_t K) {
    __shared__ float As[2][BK][BM + 4];
    __shared__ float Bs[2][BK][BN + 4];
    const int tid = threadIdx.x, tx = tid % 16, ty = tid / 16;
    const int64_t m0 = (int64_t)blockIdx.y * BM, n0 = (int64_t)blockIdx.x * BN;
    float acc[4][4];
#pragma unroll
    for (int i = 0; i < 4; ++i)
#pragma unroll
        for (int j = 0; j < 4; ++j) acc[i][j] = 0.f;
    float ra[4], rb[4];
    fetch(x, M, m0, K, 0, tid, ra);
    fetch(w, N, n0, K, 0, tid, rb);
    stash(As[0], tid, ra);
    stash(Bs[0], tid, rb);
    __syncthreads();
    const int64_t tiles = (K + BK - 1) / BK;
    for (int64_t t = 0; t < tiles; ++t) {
        const int cur = (int)(t & 1);
        const bool more = t + 1 < tiles;
        if (more) {
            fetch(x, M, m0, K, (t + 1) * BK, tid, ra);
            fetch(w, N, n0, K, (t + 1) * BK, tid, rb);
        }
#pragma unroll
        for (int kk = 0; kk < BK; ++kk) {
            float a[4], bv[4];
#pragma unroll
            for (int i = 0; i < 4; ++i) a[i] = As[cur][kk][ty + 16 * i];
#pragma unroll
            for (int j = 0; j < 4; ++j) bv[j] = Bs[cur][kk][tx + 16 * j];
#pragma unroll
            for (int i = 0; i < 4; ++i)
#pragma unroll
                for (int j = 0; j < 4; ++j) acc[i][j] = fmaf(a[i], bv[j], acc[i][j]);
        }
        if (more) {
            stash(As[cur ^ 1], tid, ra);
            stash(Bs[cur ^ 1], tid, rb);
        }
        __syncthreads();
    }
#pragma unroll
    for (int i = 0; i < 4; ++i)
#pragma unroll
        for (int j = 0; j < 4; ++j) {
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
        TORCH_CHECK((M + BM - 1) / BM < 65536, "linear_relu_forward: too many rows for the grid");
        dim3 grid((unsigned)((N + BN - 1) / BN), (unsigned)((M + BM - 1) / BM));
        linear_db<scalar_t><<<grid, 256, 0, stream>>>(xp, wp, bp, yp, M, N, K);
        C10_CUDA_KERNEL_LAUNCH_CHECK();
    });
    return out.view(shape);
}
"""

cpp_source = "torch::Tensor linear_relu_forward(torch::Tensor x, torch::Tensor w, torch::Tensor b);"

ext = load_inline(name="kbr_linear_relu_double_buffered_64x64", cpp_sources=cpp_source, cuda_sources=cuda_source,
                  functions=["linear_relu_forward"], extra_cuda_cflags=["-O3"])


class ModelNew(nn.Module):
    def __init__(self, in_features: int, out_features: int):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)

    def forward(self, x):
        return ext.linear_relu_forward(x, self.linear.weight, self.linear.bias)

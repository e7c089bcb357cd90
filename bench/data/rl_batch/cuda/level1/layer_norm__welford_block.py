"""LayerNorm candidate (CUDA): a block per row, Welford running (count, mean, M2) per thread merged pairwise
(Chan's formula) by warp shuffles and a shared-memory step; one read for the statistics, one for the output;
block=256."""

import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cuda_source = r"""
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAGuard.h>

constexpr int BLOCK = 256;

struct Stat { float n, mean, m2; };

__device__ __forceinline__ Stat combine(Stat a, Stat b) {
    const float n = a.n + b.n;
    if (n == 0.f) return a;
    const float d = b.mean - a.mean, fb = b.n / n;
    return {n, a.mean + d * fb, a.m2 + b.m2 + d * d * a.n * fb};
}

__device__ __forceinline__ Stat shfl(Stat s, int o) {
    return {__shfl_xor_sync(0xffffffffu, s.n, o), __shfl_xor_sync(0xffffffffu, s.mean, o), __shfl_xor_sync(0xffffffffu, s.m2, o)};
}

template <typename T>
__global__ void __launch_bounds__(BLOCK) ln_welford(const T* __restrict__ x, const T* __restrict__ w,
        const T* __restrict__ b, T* __restrict__ y, int64_t rows, int64_t H, float eps) {
    __shared__ Stat part[BLOCK / 32];
    __shared__ float stats[2];
    for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
        const T* xr = x + r * H;
        T* yr = y + r * H;
        Stat s = {0.f, 0.f, 0.f};
        for (int64_t i = threadIdx.x; i < H; i += BLOCK) {
            const float v = static_cast<float>(xr[i]);
            s.n += 1.f;
            const float d = v - s.mean;
            s.mean += d / s.n;
            s.m2 += d * (v - s.mean);
        }
        for (int o = 16; o; o >>= 1) s = combine(s, shfl(s, o));
        if ((threadIdx.x & 31) == 0) part[threadIdx.x >> 5] = s;
        __syncthreads();
        if (threadIdx.x == 0) {
            Stat t = part[0];
            for (int k = 1; k < BLOCK / 32; ++k) t = combine(t, part[k]);
            stats[0] = t.mean;
            stats[1] = rsqrtf(t.m2 / (float)H + eps);
        }
        __syncthreads();
        const float mean = stats[0], rstd = stats[1];
        for (int64_t i = threadIdx.x; i < H; i += BLOCK)
            yr[i] = static_cast<T>((static_cast<float>(xr[i]) - mean) * rstd * static_cast<float>(w[i]) + static_cast<float>(b[i]));
        __syncthreads();
    }
}

torch::Tensor layernorm_forward(torch::Tensor x, torch::Tensor w, torch::Tensor b, double eps) {
    TORCH_CHECK(x.is_cuda() && w.is_cuda() && b.is_cuda(), "layernorm_forward: CUDA tensors expected");
    TORCH_CHECK(x.dim() >= 1 && w.numel() == x.size(-1) && b.numel() == x.size(-1),
                "layernorm_forward: weight and bias must match the last dimension");
    const at::cuda::OptionalCUDAGuard guard(x.device());
    auto xc = x.contiguous();
    auto wc = w.contiguous().to(x.scalar_type()), bc = b.contiguous().to(x.scalar_type());
    auto y = torch::empty_like(xc);
    const int64_t H = xc.size(-1), rows = H ? xc.numel() / H : 0;
    if (rows == 0 || H == 0) return y;
    cudaStream_t stream = at::cuda::getCurrentCUDAStream();
    const int sms = at::cuda::getCurrentDeviceProperties()->multiProcessorCount;
    AT_DISPATCH_FLOATING_TYPES_AND2(at::ScalarType::Half, at::ScalarType::BFloat16, xc.scalar_type(), "ln", [&] {
        const scalar_t* xp = xc.data_ptr<scalar_t>();
        const scalar_t* wp = wc.data_ptr<scalar_t>();
        const scalar_t* bp = bc.data_ptr<scalar_t>();
        scalar_t* yp = y.data_ptr<scalar_t>();
        (void)sms;
        const int grid = (int)std::min<int64_t>(rows, (int64_t)sms * 8);
        ln_welford<scalar_t><<<grid, BLOCK, 0, stream>>>(xp, wp, bp, yp, rows, H, (float)eps);
    });
    C10_CUDA_KERNEL_LAUNCH_CHECK();
    return y;
}
"""

cpp_source = "torch::Tensor layernorm_forward(torch::Tensor x, torch::Tensor w, torch::Tensor b, double eps);"

ext = load_inline(name="kbr_layer_norm_welford_block", cpp_sources=cpp_source, cuda_sources=cuda_source,
                  functions=["layernorm_forward"], extra_cuda_cflags=["-O3"])


class ModelNew(nn.Module):
    def __init__(self, hidden: int, eps: float = 1e-5):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(1.0 + 0.5 * torch.randn(hidden))
        self.bias = nn.Parameter(0.5 * torch.randn(hidden))

    def forward(self, x):
        return ext.layernorm_forward(x, self.weight, self.bias, self.eps)

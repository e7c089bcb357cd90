"""LayerNorm candidate (CUDA): a block per row, one pass of shifted sums (sum of x - K and of (x - K)^2, K the
row's first element, so no cancellation) reduced through a shared-memory tree, then the output pass; block=256."""

import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cuda_source = r"""
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAGuard.h>

constexpr int BLOCK = 256;

template <typename T>
__global__ void __launch_bounds__(BLOCK) ln_shifted(const T* __restrict__ x, const T* __restrict__ w,
        const T* __restrict__ b, T* __restrict__ y, int64_t H, float eps) {
    __shared__ float s1[BLOCK], s2[BLOCK];
    const T* xr = x + (int64_t)blockIdx.x * H;
    T* yr = y + (int64_t)blockIdx.x * H;
    const float K = static_cast<float>(xr[0]);
    float a = 0.f, q = 0.f;
    for (int64_t i = threadIdx.x; i < H; i += BLOCK) {
        const float d = static_cast<float>(xr[i]) - K;
        a += d;
        q += d * d;
    }
    s1[threadIdx.x] = a;
    s2[threadIdx.x] = q;
    __syncthreads();
    for (int h = BLOCK / 2; h > 0; h >>= 1) {
        if (threadIdx.x < h) { s1[threadIdx.x] += s1[threadIdx.x + h]; s2[threadIdx.x] += s2[threadIdx.x + h]; }
        __syncthreads();
    }
    const float md = s1[0] / (float)H;              // mean of x - K
    const float var = fmaxf(s2[0] / (float)H - md * md, 0.f);
    const float mean = K + md, rstd = rsqrtf(var + eps);
    for (int64_t i = threadIdx.x; i < H; i += BLOCK)
        yr[i] = static_cast<T>((static_cast<float>(xr[i]) - mean) * rstd * static_cast<float>(w[i]) + static_cast<float>(b[i]));
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
        TORCH_CHECK(rows <= 2147483647LL, "layernorm_forward: too many rows");
        ln_shifted<scalar_t><<<(unsigned)rows, BLOCK, 0, stream>>>(xp, wp, bp, yp, H, (float)eps);
    });
    C10_CUDA_KERNEL_LAUNCH_CHECK();
    return y;
}
"""

cpp_source = "torch::Tensor layernorm_forward(torch::Tensor x, torch::Tensor w, torch::Tensor b, double eps);"

ext = load_inline(name="kbr_layernorm_forward_shifted_one_pass", cpp_sources=cpp_source, cuda_sources=cuda_source,
                  functions=["layernorm_forward"], extra_cuda_cflags=["-O3"])


class ModelNew(nn.Module):
    def __init__(self, hidden: int, eps: float = 1e-5):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(1.0 + 0.5 * torch.randn(hidden))
        self.bias = nn.Parameter(0.5 * torch.randn(hidden))

    def forward(self, x):
        return ext.layernorm_forward(x, self.weight, self.bias, self.eps)

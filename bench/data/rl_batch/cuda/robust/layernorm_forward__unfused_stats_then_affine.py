"""LayerNorm candidate (CUDA): unfused: kernel 1 writes each row's mean and rstd (a block per row, two-pass,
shuffle reductions) to a float32 buffer, kernel 2 normalises and applies the affine elementwise over a 1-D grid;
block=512."""

import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cuda_source = r"""
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAGuard.h>

constexpr int BLOCK = 512;

__device__ __forceinline__ float wsum(float v) {
    for (int o = 16; o; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}
__device__ float bsum(float v, float* shm) {
    v = wsum(v);
    if ((threadIdx.x & 31) == 0) shm[threadIdx.x >> 5] = v;
    __syncthreads();
    float t = 0.f;
    for (int k = 0; k < BLOCK / 32; ++k) t += shm[k];
    __syncthreads();
    return t;
}

template <typename T>
__global__ void __launch_bounds__(BLOCK) row_stats(const T* __restrict__ x, float2* __restrict__ st, int64_t H, float eps) {
    __shared__ float shm[BLOCK / 32];
    const T* xr = x + (int64_t)blockIdx.x * H;
    float s = 0.f;
    for (int64_t i = threadIdx.x; i < H; i += BLOCK) s += static_cast<float>(xr[i]);
    const float mean = bsum(s, shm) / (float)H;
    float q = 0.f;
    for (int64_t i = threadIdx.x; i < H; i += BLOCK) { const float d = static_cast<float>(xr[i]) - mean; q += d * d; }
    const float var = bsum(q, shm) / (float)H;
    if (threadIdx.x == 0) st[blockIdx.x] = make_float2(mean, rsqrtf(var + eps));
}

template <typename T>
__global__ void affine(const T* __restrict__ x, const float2* __restrict__ st, const T* __restrict__ w,
                       const T* __restrict__ b, T* __restrict__ y, int64_t n, int64_t H) {
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x) {
        const int64_t r = i / H, c = i - r * H;
        const float2 s = st[r];
        y[i] = static_cast<T>((static_cast<float>(x[i]) - s.x) * s.y * static_cast<float>(w[c]) + static_cast<float>(b[c]));
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
        TORCH_CHECK(rows <= 2147483647LL, "layernorm_forward: too many rows");
        auto st = torch::empty({rows * 2}, xc.options().dtype(at::kFloat));
        float2* sp = reinterpret_cast<float2*>(st.data_ptr<float>());
        row_stats<scalar_t><<<(unsigned)rows, BLOCK, 0, stream>>>(xp, sp, H, (float)eps);
        C10_CUDA_KERNEL_LAUNCH_CHECK();
        const int64_t n = rows * H;
        const int grid = (int)std::min<int64_t>((n + 255) / 256, (int64_t)sms * 32);
        affine<scalar_t><<<grid, 256, 0, stream>>>(xp, sp, wp, bp, yp, n, H);
    });
    C10_CUDA_KERNEL_LAUNCH_CHECK();
    return y;
}
"""

cpp_source = "torch::Tensor layernorm_forward(torch::Tensor x, torch::Tensor w, torch::Tensor b, double eps);"

ext = load_inline(name="kbr_layernorm_forward_unfused_stats_then_affine", cpp_sources=cpp_source, cuda_sources=cuda_source,
                  functions=["layernorm_forward"], extra_cuda_cflags=["-O3"])


class ModelNew(nn.Module):
    def __init__(self, hidden: int, eps: float = 1e-5):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(1.0 + 0.5 * torch.randn(hidden))
        self.bias = nn.Parameter(0.5 * torch.randn(hidden))

    def forward(self, x):
        return ext.layernorm_forward(x, self.weight, self.bias, self.eps)

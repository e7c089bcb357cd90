"""RMSNorm candidate (CUDA): unfused: kernel 1 writes each row's 1/rms to a float32 buffer (a 512-thread block per
row, shuffle reductions), kernel 2 scales every element by its row's factor and the weight over a 2-D grid."""

import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cuda_source = r"""
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAGuard.h>

constexpr int BLOCK = 512;

template <typename T>
__global__ void __launch_bounds__(BLOCK) row_rstd(const T* __restrict__ x, float* __restrict__ rs, int64_t H, float eps) {
    __shared__ float part[BLOCK / 32];
    const T* xr = x + (int64_t)blockIdx.x * H;
    float q = 0.f;
    for (int64_t i = threadIdx.x; i < H; i += BLOCK) { const float v = static_cast<float>(xr[i]); q += v * v; }
    for (int o = 16; o; o >>= 1) q += __shfl_xor_sync(0xffffffffu, q, o);
    if ((threadIdx.x & 31) == 0) part[threadIdx.x >> 5] = q;
    __syncthreads();
    if (threadIdx.x == 0) {
        float t = 0.f;
        for (int k = 0; k < BLOCK / 32; ++k) t += part[k];
        rs[blockIdx.x] = rsqrtf(t / (float)H + eps);
    }
}

// grid (column tiles, rows): a row factor per block row, the weight indexed by column.
template <typename T>
__global__ void scale(const T* __restrict__ x, const float* __restrict__ rs, const T* __restrict__ w, T* __restrict__ y,
                      int64_t rows, int64_t H) {
    const int64_t c = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (c >= H) return;
    const float wc = static_cast<float>(w[c]);
    for (int64_t r = blockIdx.y; r < rows; r += gridDim.y)
        y[r * H + c] = static_cast<T>(static_cast<float>(x[r * H + c]) * rs[r] * wc);
}

torch::Tensor rmsnorm_forward(torch::Tensor x, torch::Tensor w, double eps) {
    TORCH_CHECK(x.is_cuda() && w.is_cuda(), "rmsnorm_forward: CUDA tensors expected");
    TORCH_CHECK(x.dim() >= 1 && w.numel() == x.size(-1), "rmsnorm_forward: weight must match the last dimension");
    const at::cuda::OptionalCUDAGuard guard(x.device());
    auto xc = x.contiguous();
    auto wc = w.contiguous().to(x.scalar_type());
    auto y = torch::empty_like(xc);
    const int64_t H = xc.size(-1), rows = H ? xc.numel() / H : 0;
    if (rows == 0 || H == 0) return y;
    cudaStream_t stream = at::cuda::getCurrentCUDAStream();
    const int sms = at::cuda::getCurrentDeviceProperties()->multiProcessorCount;
    AT_DISPATCH_FLOATING_TYPES_AND2(at::ScalarType::Half, at::ScalarType::BFloat16, xc.scalar_type(), "rms", [&] {
        const scalar_t* xp = xc.data_ptr<scalar_t>();
        const scalar_t* wp = wc.data_ptr<scalar_t>();
        scalar_t* yp = y.data_ptr<scalar_t>();
        (void)sms;
        TORCH_CHECK(rows <= 2147483647LL, "rmsnorm_forward: too many rows");
        auto rs = torch::empty({rows}, xc.options().dtype(at::kFloat));
        row_rstd<scalar_t><<<(unsigned)rows, BLOCK, 0, stream>>>(xp, rs.data_ptr<float>(), H, (float)eps);
        C10_CUDA_KERNEL_LAUNCH_CHECK();
        dim3 grid((unsigned)((H + 255) / 256), (unsigned)std::min<int64_t>(rows, 16384));
        scale<scalar_t><<<grid, 256, 0, stream>>>(xp, rs.data_ptr<float>(), wp, yp, rows, H);
    });
    C10_CUDA_KERNEL_LAUNCH_CHECK();
    return y;
}
"""

cpp_source = "torch::Tensor rmsnorm_forward(torch::Tensor x, torch::Tensor w, double eps);"

ext = load_inline(name="kbr_rmsnorm_forward_unfused_rstd_then_scale", cpp_sources=cpp_source, cuda_sources=cuda_source,
                  functions=["rmsnorm_forward"], extra_cuda_cflags=["-O3"])


class ModelNew(nn.Module):
    def __init__(self, hidden: int, eps: float = 1e-6):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(1.0 + 0.5 * torch.randn(hidden))

    def forward(self, x):
        return ext.rmsnorm_forward(x, self.weight, self.eps)

"""LayerNorm candidate (CUDA): a block per row with 16-byte vector loads and stores of x, weight and bias when the
hidden size and pointers allow (else scalar), two-pass statistics re-read from global memory; block=256."""

import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cuda_source = r"""
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAGuard.h>

constexpr int BLOCK = 256;

template <typename T, int N>
struct alignas(sizeof(T) * N) vec { T v[N]; };

__device__ __forceinline__ float wsum(float v) {
    for (int o = 16; o; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}
__device__ float bsum(float v, float* shm) {
    v = wsum(v);
    if ((threadIdx.x & 31) == 0) shm[threadIdx.x >> 5] = v;
    __syncthreads();
    // Every warp sums the BLOCK/32 partials itself, so every thread holds the block total (not only warp 0).
    const int lane = threadIdx.x & 31;
    v = lane < BLOCK / 32 ? shm[lane] : 0.f;
    v = wsum(v);
    __syncthreads();
    return v;
}

template <typename T, int V>
__global__ void __launch_bounds__(BLOCK) ln_vec(const T* __restrict__ x, const T* __restrict__ w,
        const T* __restrict__ b, T* __restrict__ y, int64_t rows, int64_t H, float eps) {
    __shared__ float shm[32];
    using P = vec<T, V>;
    const int64_t nv = H / V;
    const P* wv = reinterpret_cast<const P*>(w);
    const P* bv = reinterpret_cast<const P*>(b);
    for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
        const P* xr = reinterpret_cast<const P*>(x + r * H);
        P* yr = reinterpret_cast<P*>(y + r * H);
        float s = 0.f;
        for (int64_t i = threadIdx.x; i < nv; i += BLOCK) {
            const P p = xr[i];
#pragma unroll
            for (int k = 0; k < V; ++k) s += static_cast<float>(p.v[k]);
        }
        const float mean = bsum(s, shm) / (float)H;
        float q = 0.f;
        for (int64_t i = threadIdx.x; i < nv; i += BLOCK) {
            const P p = xr[i];
#pragma unroll
            for (int k = 0; k < V; ++k) { const float d = static_cast<float>(p.v[k]) - mean; q += d * d; }
        }
        const float rstd = rsqrtf(bsum(q, shm) / (float)H + eps);
        for (int64_t i = threadIdx.x; i < nv; i += BLOCK) {
            P p = xr[i];
            const P pw = wv[i], pb = bv[i];
#pragma unroll
            for (int k = 0; k < V; ++k)
                p.v[k] = static_cast<T>((static_cast<float>(p.v[k]) - mean) * rstd * static_cast<float>(pw.v[k]) +
                                        static_cast<float>(pb.v[k]));
            yr[i] = p;
        }
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
        constexpr int V = 16 / sizeof(scalar_t);
        auto al = [](const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; };
        const bool ok = H % V == 0 && al(xp) && al(wp) && al(bp) && al(yp);
        const int grid = (int)std::min<int64_t>(rows, (int64_t)sms * 8);
        if (ok) ln_vec<scalar_t, V><<<grid, BLOCK, 0, stream>>>(xp, wp, bp, yp, rows, H, (float)eps);
        else ln_vec<scalar_t, 1><<<grid, BLOCK, 0, stream>>>(xp, wp, bp, yp, rows, H, (float)eps);
    });
    C10_CUDA_KERNEL_LAUNCH_CHECK();
    return y;
}
"""

cpp_source = "torch::Tensor layernorm_forward(torch::Tensor x, torch::Tensor w, torch::Tensor b, double eps);"

ext = load_inline(name="kbr_layer_norm_vectorized_16b", cpp_sources=cpp_source, cuda_sources=cuda_source,
                  functions=["layernorm_forward"], extra_cuda_cflags=["-O3"])


class ModelNew(nn.Module):
    def __init__(self, hidden: int, eps: float = 1e-5):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(1.0 + 0.5 * torch.randn(hidden))
        self.bias = nn.Parameter(0.5 * torch.randn(hidden))

    def forward(self, x):
        return ext.layernorm_forward(x, self.weight, self.bias, self.eps)

"""ReLU candidate (CUDA): element pairs through the packed types (float2, __half2, __nv_bfloat162, double2) in a
grid-stride loop, with a scalar path for a misaligned buffer or an odd last element."""

import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cuda_source = r"""
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAGuard.h>
#include <cuda_fp16.h>
#include <cuda_bf16.h>

template <typename T> struct pair_of;
template <> struct pair_of<float> {
    using P = float2;
    static __device__ float lo(P p) { return p.x; }
    static __device__ float hi(P p) { return p.y; }
    static __device__ P make(float a, float b) { return make_float2(a, b); }
};
template <> struct pair_of<double> {
    using P = double2;
    static __device__ double lo(P p) { return p.x; }
    static __device__ double hi(P p) { return p.y; }
    static __device__ P make(double a, double b) { return make_double2(a, b); }
};
template <> struct pair_of<c10::Half> {
    using P = __half2;
    static __device__ float lo(P p) { return __low2float(p); }
    static __device__ float hi(P p) { return __high2float(p); }
    static __device__ P make(float a, float b) { return __floats2half2_rn(a, b); }
};
template <> struct pair_of<c10::BFloat16> {
    using P = __nv_bfloat162;
    static __device__ float lo(P p) { return __low2float(p); }
    static __device__ float hi(P p) { return __high2float(p); }
    static __device__ P make(float a, float b) { return __floats2bfloat162_rn(a, b); }
};

template <typename V>
__device__ __forceinline__ V relu1(V v) { return v < V(0) ? V(0) : v; }

template <typename T>
__global__ void relu_pairs(const T* __restrict__ x, T* __restrict__ y, int64_t npairs, int64_t n) {
    using PT = pair_of<T>;
    using P = typename PT::P;
    const P* xp = reinterpret_cast<const P*>(x);
    P* yp = reinterpret_cast<P*>(y);
    const int64_t stride = (int64_t)gridDim.x * blockDim.x;
    const int64_t start = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    for (int64_t i = start; i < npairs; i += stride) {
        const P p = xp[i];
        yp[i] = PT::make(relu1(PT::lo(p)), relu1(PT::hi(p)));
    }
    for (int64_t i = 2 * npairs + start; i < n; i += stride) {
        const float v = static_cast<float>(x[i]);
        y[i] = static_cast<T>(relu1(v));
    }
}

torch::Tensor relu_forward(torch::Tensor x) {
    TORCH_CHECK(x.is_cuda(), "relu_forward: expected a CUDA tensor");
    const at::cuda::OptionalCUDAGuard guard(x.device());
    auto xc = x.contiguous();
    auto y = torch::empty_like(xc);
    const int64_t n = xc.numel();
    if (n == 0) return y;
    const int threads = 256;
    const int cap = at::cuda::getCurrentDeviceProperties()->multiProcessorCount * 16;
    AT_DISPATCH_FLOATING_TYPES_AND2(at::ScalarType::Half, at::ScalarType::BFloat16, xc.scalar_type(), "relu_pairs", [&] {
        const size_t align = 2 * sizeof(scalar_t);
        const bool ok = reinterpret_cast<uintptr_t>(xc.data_ptr()) % align == 0 &&
                        reinterpret_cast<uintptr_t>(y.data_ptr()) % align == 0;
        const int64_t npairs = ok ? n / 2 : 0;
        const int64_t work = ok ? npairs + 1 : n;
        const int grid = (int)std::max<int64_t>(1, std::min<int64_t>((work + threads - 1) / threads, cap));
        relu_pairs<scalar_t><<<grid, threads, 0, at::cuda::getCurrentCUDAStream()>>>(
            xc.data_ptr<scalar_t>(), y.data_ptr<scalar_t>(), npairs, n);
    });
    C10_CUDA_KERNEL_LAUNCH_CHECK();
    return y;
}
"""

cpp_source = "torch::Tensor relu_forward(torch::Tensor x);"

ext = load_inline(name="kbr_relu_packed2", cpp_sources=cpp_source, cuda_sources=cuda_source,
                  functions=["relu_forward"], extra_cuda_cflags=["-O3"])


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return ext.relu_forward(x)

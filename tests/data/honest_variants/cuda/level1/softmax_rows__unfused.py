"""Honest variant of level1/softmax_rows (CUDA): unfused, three kernels launched one after another (row maxima,
shifted exponentials with their row sums, scaling), each a block per row with a shared-memory tree reduction."""

import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cuda_source = r"""
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAGuard.h>

constexpr int BLOCK = 256;

// Tree reduction over the block in shared memory (halving strides); thread 0 ends with the result.
template <bool IS_MAX>
__device__ float kbv_block_tree(float v, float* shm) {
    shm[threadIdx.x] = v;
    __syncthreads();
    for (int s = BLOCK / 2; s > 0; s >>= 1) {
        if (threadIdx.x < s) shm[threadIdx.x] = IS_MAX ? fmaxf(shm[threadIdx.x], shm[threadIdx.x + s])
                                                       : shm[threadIdx.x] + shm[threadIdx.x + s];
        __syncthreads();
    }
    return shm[0];
}

#define KBV_DISPATCH(TYPE, NAME, ...) \
    AT_DISPATCH_FLOATING_TYPES_AND2(at::ScalarType::Half, at::ScalarType::BFloat16, TYPE, NAME, __VA_ARGS__)

template <typename T>
__global__ void kbv_row_max(const T* __restrict__ x, float* __restrict__ m, int64_t C) {
    __shared__ float shm[BLOCK];
    const T* xr = x + blockIdx.x * C;
    float v = -INFINITY;
    for (int64_t i = threadIdx.x; i < C; i += BLOCK) v = fmaxf(v, static_cast<float>(xr[i]));
    v = kbv_block_tree<true>(v, shm);
    if (threadIdx.x == 0) m[blockIdx.x] = v;
}

// The exponentials are kept in float32 (a buffer of their own) whatever the input's dtype.
template <typename T>
__global__ void kbv_exp_sum(const T* __restrict__ x, const float* __restrict__ m, float* __restrict__ e,
        float* __restrict__ s, int64_t C) {
    __shared__ float shm[BLOCK];
    const T* xr = x + blockIdx.x * C;
    float* er = e + blockIdx.x * C;
    const float mr = m[blockIdx.x];
    float acc = 0.f;
    for (int64_t i = threadIdx.x; i < C; i += BLOCK) {
        const float v = expf(static_cast<float>(xr[i]) - mr);
        er[i] = v;
        acc += v;
    }
    acc = kbv_block_tree<false>(acc, shm);
    if (threadIdx.x == 0) s[blockIdx.x] = acc;
}

template <typename T>
__global__ void kbv_scale(const float* __restrict__ e, const float* __restrict__ s, T* __restrict__ y, int64_t C) {
    const float inv = 1.f / s[blockIdx.x];
    for (int64_t i = threadIdx.x; i < C; i += BLOCK) y[blockIdx.x * C + i] = static_cast<T>(e[blockIdx.x * C + i] * inv);
}

torch::Tensor row_max(torch::Tensor x) {
    TORCH_CHECK(x.is_cuda() && x.dim() == 2 && x.is_contiguous(), "row_max: a contiguous 2-D CUDA tensor");
    const at::cuda::OptionalCUDAGuard guard(x.device());
    auto m = torch::empty({x.size(0)}, x.options().dtype(at::kFloat));
    if (x.size(0) == 0) return m;
    KBV_DISPATCH(x.scalar_type(), "kbv_row_max", [&] {
        kbv_row_max<scalar_t><<<(unsigned)x.size(0), BLOCK, 0, at::cuda::getCurrentCUDAStream()>>>(
            x.data_ptr<scalar_t>(), m.data_ptr<float>(), x.size(1));
    });
    C10_CUDA_KERNEL_LAUNCH_CHECK();
    return m;
}

std::vector<torch::Tensor> exp_sum(torch::Tensor x, torch::Tensor m) {
    TORCH_CHECK(x.is_contiguous() && m.numel() == x.size(0), "exp_sum: shapes");
    const at::cuda::OptionalCUDAGuard guard(x.device());
    auto e = torch::empty(x.sizes(), x.options().dtype(at::kFloat));
    auto s = torch::empty({x.size(0)}, x.options().dtype(at::kFloat));
    if (x.size(0) == 0) return {e, s};
    KBV_DISPATCH(x.scalar_type(), "kbv_exp_sum", [&] {
        kbv_exp_sum<scalar_t><<<(unsigned)x.size(0), BLOCK, 0, at::cuda::getCurrentCUDAStream()>>>(
            x.data_ptr<scalar_t>(), m.data_ptr<float>(), e.data_ptr<float>(), s.data_ptr<float>(), x.size(1));
    });
    C10_CUDA_KERNEL_LAUNCH_CHECK();
    return {e, s};
}

torch::Tensor scale_rows(torch::Tensor e, torch::Tensor s, torch::Tensor like) {
    TORCH_CHECK(e.is_contiguous() && s.numel() == e.size(0), "scale_rows: shapes");
    const at::cuda::OptionalCUDAGuard guard(e.device());
    auto y = torch::empty(e.sizes(), like.options());
    if (e.size(0) == 0) return y;
    KBV_DISPATCH(like.scalar_type(), "kbv_scale", [&] {
        kbv_scale<scalar_t><<<(unsigned)e.size(0), BLOCK, 0, at::cuda::getCurrentCUDAStream()>>>(
            e.data_ptr<float>(), s.data_ptr<float>(), y.data_ptr<scalar_t>(), e.size(1));
    });
    C10_CUDA_KERNEL_LAUNCH_CHECK();
    return y;
}
"""

cpp_source = """
torch::Tensor row_max(torch::Tensor x);
std::vector<torch::Tensor> exp_sum(torch::Tensor x, torch::Tensor m);
torch::Tensor scale_rows(torch::Tensor e, torch::Tensor s, torch::Tensor like);
"""

ext = load_inline(name="kbv_cuda_softmax_rows_unfused", cpp_sources=cpp_source, cuda_sources=cuda_source,
                  functions=["row_max", "exp_sum", "scale_rows"], extra_cuda_cflags=["-O3"])


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        m = ext.row_max(x)
        e, s = ext.exp_sum(x, m)
        return ext.scale_rows(e, s, x)

"""Issue #34, direct ATen call, CUDA backend (KernelBench's format), task level2/linear_relu: the candidate's
extension computes the linear layer with ``at::cuda::addmm``, the CUDA kernel's own entry point (cuBLAS's GEMM,
launched past the dispatcher: no operator record reaches the forward audit), and runs only the ReLU in a kernel of
its own. Under the strict rules it is flagged from its library's symbols; under the kernelbench rules its coverage
counts only its ReLU kernel: cuBLAS's GEMM, launched from inside its call, is named like a library's kernel and
defined in none of its libraries."""

import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cuda_source = r"""
#include <ATen/cuda/CUDAContext.h>
#include <ATen/ops/addmm_cuda_dispatch.h>

template <typename T>
__global__ void kb_relu_inplace(T* __restrict__ y, int64_t n) {
  for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x)
    y[i] = static_cast<float>(y[i]) > 0.f ? y[i] : T(0.f);
}

torch::Tensor linear_relu(torch::Tensor x, torch::Tensor weight, torch::Tensor bias) {
  torch::Tensor y = at::cuda::addmm(bias, x, weight.t());  // cuBLAS, past the dispatcher
  const int64_t n = y.numel();
  AT_DISPATCH_FLOATING_TYPES_AND2(at::ScalarType::Half, at::ScalarType::BFloat16, y.scalar_type(), "kb_relu", [&] {
    kb_relu_inplace<scalar_t><<<(unsigned)std::min<int64_t>((n + 255) / 256, 65535), 256, 0,
                                at::cuda::getCurrentCUDAStream()>>>(y.data_ptr<scalar_t>(), n);
  });
  return y;
}
"""

ext = load_inline(name="kb_aten_direct_cuda", cpp_sources="torch::Tensor linear_relu(torch::Tensor x, "
                  "torch::Tensor weight, torch::Tensor bias);", cuda_sources=cuda_source, functions=["linear_relu"])


class ModelNew(nn.Module):
    def __init__(self, in_features: int, out_features: int):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)

    def forward(self, x):
        return ext.linear_relu(x.contiguous(), self.linear.weight, self.linear.bias)

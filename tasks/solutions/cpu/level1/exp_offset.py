"""Elementwise exp with a vectorisable polynomial exp, OpenMP over chunks (CPU backend sample solution)."""

import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cpp_source = r"""
#include <ATen/core/Tensor.h>
#include <ATen/ops/empty.h>
#include <torch/library.h>
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>

// One build, several code paths (AVX-512, AVX2, baseline): the loader picks the best the CPU has at run time.
#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__)
#define KB_MULTIVERSION __attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
#else
#define KB_MULTIVERSION
#endif
// Helpers called from a multiversioned kernel must be inlined into it to get its instruction set.
#define KB_INLINE inline __attribute__((always_inline))

constexpr int64_t CHUNK = 16384;  // kbench-tune: 4096 16384 65536

namespace {

// exp(x) for float32 (relative error < 1e-7) in a form the compiler vectorises: 2^n * p(r), r = x - n ln2.
KB_INLINE float exp_f(float x) {
  x = x > -87.0f ? x : -87.0f;
  x = x < 88.0f ? x : 88.0f;
  const float fx = x * 1.44269504088896341f + 0.5f;
  const int32_t ti = (int32_t)fx;
  const int32_t n = ti - ((float)ti > fx ? 1 : 0);  // floor, in the integer domain
  const float t = (float)n;
  const float r = x - t * 0.693359375f + t * 2.12194440e-4f;
  float p = 1.9875691500e-4f;
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  p = p * r * r + r + 1.0f;
  const int32_t bits = (n + 127) << 23;
  float scale;
  std::memcpy(&scale, &bits, sizeof(scale));
  return p * scale;
}

KB_MULTIVERSION
void exp_kernel(const float* __restrict x, float* __restrict y, int64_t n) {
  const int64_t n_chunks = (n + CHUNK - 1) / CHUNK;
  #pragma omp parallel for schedule(static)
  for (int64_t c = 0; c < n_chunks; ++c) {
    const int64_t s = c * CHUNK, e = std::min(n, s + CHUNK);
    #pragma omp simd
    for (int64_t i = s; i < e; ++i) y[i] = exp_f(x[i]);
  }
}

}  // namespace

at::Tensor exp_forward(const at::Tensor& x) {
  TORCH_CHECK(x.scalar_type() == at::kFloat, "exp_forward: float32 input expected");
  at::Tensor xc = x.contiguous();
  at::Tensor out = at::empty(xc.sizes(), xc.options());
  exp_kernel(xc.data_ptr<float>(), out.data_ptr<float>(), xc.numel());
  return out;
}

TORCH_LIBRARY(kb_exp_offset, m) { m.def("exp_forward(Tensor x) -> Tensor", &exp_forward); }
"""

# -fno-trapping-math lets the compiler turn branches (clamps, selects) into vector blends; it changes no result.
load_inline(
    name="kb_exp_offset",
    cpp_sources=cpp_source,
    is_python_module=False,
    no_implicit_headers=True,
    extra_cflags=["-O3", "-fopenmp", "-fno-trapping-math", "-fno-math-errno"],
    extra_ldflags=["-fopenmp"],
)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.ops.kb_exp_offset.exp_forward(x)

"""Row softmax for long rows: max, then exp with a double sum, then scale; OpenMP over rows (CPU backend sample
solution)."""

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

constexpr int64_t ROWS_PER_TASK = 1;  // kbench-tune: 1 2 4

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
void softmax_kernel(const float* __restrict x, float* __restrict y, int64_t rows, int64_t cols) {
  #pragma omp parallel for schedule(static, ROWS_PER_TASK)
  for (int64_t r = 0; r < rows; ++r) {
    const float* __restrict xr = x + r * cols;
    float* __restrict yr = y + r * cols;
    float m = -INFINITY;
    #pragma omp simd reduction(max : m)
    for (int64_t j = 0; j < cols; ++j) m = xr[j] > m ? xr[j] : m;
    // The row's terms are all near exp(0): a double sum keeps the normaliser exact to float32 for any length.
    double s = 0.0;
    #pragma omp simd reduction(+ : s)
    for (int64_t j = 0; j < cols; ++j) {
      const float e = exp_f(xr[j] - m);
      yr[j] = e;
      s += (double)e;
    }
    const float inv = (float)(1.0 / s);
    #pragma omp simd
    for (int64_t j = 0; j < cols; ++j) yr[j] *= inv;
  }
}

}  // namespace

at::Tensor softmax_forward(const at::Tensor& x) {
  TORCH_CHECK(x.scalar_type() == at::kFloat && x.dim() == 2, "softmax_forward: 2-D float32 input expected");
  at::Tensor xc = x.contiguous();
  at::Tensor out = at::empty(xc.sizes(), xc.options());
  softmax_kernel(xc.data_ptr<float>(), out.data_ptr<float>(), xc.size(0), xc.size(1));
  return out;
}

TORCH_LIBRARY(kb_softmax_long_rows, m) { m.def("softmax_forward(Tensor x) -> Tensor", &softmax_forward); }
"""

# -fno-trapping-math lets the compiler turn branches (clamps, selects) into vector blends; it changes no result.
load_inline(
    name="kb_softmax_long_rows",
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
        return torch.ops.kb_softmax_long_rows.softmax_forward(x)

"""Row running maximum, a block of rows advanced together one column at a time (CPU backend sample solution)."""

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

constexpr int64_t RB = 4;  // kbench-tune: 1 2 4 8

namespace {

// torch.cummax propagates NaN: once a row has seen one, its running maximum stays NaN.
KB_INLINE float max_nan(float m, float v) { return (v > m || v != v) ? v : m; }

// RB rows advance together, one column at a time: their RB dependency chains interleave instead of each row
// waiting on its own previous maximum.
KB_MULTIVERSION
void cummax_kernel(const float* __restrict x, float* __restrict y, int64_t rows, int64_t cols) {
  const int64_t n_blocks = (rows + RB - 1) / RB;
  #pragma omp parallel for schedule(static)
  for (int64_t blk = 0; blk < n_blocks; ++blk) {
    const int64_t r0 = blk * RB, nr = std::min<int64_t>(RB, rows - r0);
    if (nr == RB) {
      float m[RB];
      for (int64_t r = 0; r < RB; ++r) m[r] = -INFINITY;
      for (int64_t j = 0; j < cols; ++j) {
        #pragma GCC unroll 8
        for (int64_t r = 0; r < RB; ++r) {
          m[r] = max_nan(m[r], x[(r0 + r) * cols + j]);
          y[(r0 + r) * cols + j] = m[r];
        }
      }
    } else {
      for (int64_t r = r0; r < r0 + nr; ++r) {
        float m = -INFINITY;
        for (int64_t j = 0; j < cols; ++j) {
          m = max_nan(m, x[r * cols + j]);
          y[r * cols + j] = m;
        }
      }
    }
  }
}

}  // namespace

at::Tensor cummax_forward(const at::Tensor& x) {
  TORCH_CHECK(x.scalar_type() == at::kFloat && x.dim() == 2, "cummax_forward: 2-D float32 input expected");
  at::Tensor xc = x.contiguous();
  at::Tensor out = at::empty(xc.sizes(), xc.options());
  cummax_kernel(xc.data_ptr<float>(), out.data_ptr<float>(), xc.size(0), xc.size(1));
  return out;
}

TORCH_LIBRARY(kb_cummax_rows, m) { m.def("cummax_forward(Tensor x) -> Tensor", &cummax_forward); }
"""

# -fno-trapping-math lets the compiler turn branches (clamps, selects) into vector blends; it changes no result.
load_inline(
    name="kb_cummax_rows",
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
        return torch.ops.kb_cummax_rows.cummax_forward(x)

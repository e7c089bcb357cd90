"""Row cumsum of positive data with double running sums, a block of rows advanced together (CPU backend sample
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

constexpr int64_t RB = 8;  // kbench-tune: 2 4 8 16

namespace {

// Double running sums: a float32 running sum of 16k positive terms rounds each late term to the spacing of a
// sum ~10^4 times its size. RB rows advance together so that their dependency chains interleave.
KB_MULTIVERSION
void cumsum_kernel(const float* __restrict x, float* __restrict y, int64_t rows, int64_t cols) {
  const int64_t n_blocks = (rows + RB - 1) / RB;
  #pragma omp parallel for schedule(static)
  for (int64_t blk = 0; blk < n_blocks; ++blk) {
    const int64_t r0 = blk * RB, nr = std::min<int64_t>(RB, rows - r0);
    if (nr == RB) {
      double acc[RB];
      for (int64_t r = 0; r < RB; ++r) acc[r] = 0.0;
      for (int64_t j = 0; j < cols; ++j) {
        #pragma GCC unroll 16
        for (int64_t r = 0; r < RB; ++r) {
          acc[r] += (double)x[(r0 + r) * cols + j];
          y[(r0 + r) * cols + j] = (float)acc[r];
        }
      }
    } else {
      for (int64_t r = r0; r < r0 + nr; ++r) {
        double acc = 0.0;
        for (int64_t j = 0; j < cols; ++j) {
          acc += (double)x[r * cols + j];
          y[r * cols + j] = (float)acc;
        }
      }
    }
  }
}

}  // namespace

at::Tensor cumsum_forward(const at::Tensor& x) {
  TORCH_CHECK(x.scalar_type() == at::kFloat && x.dim() == 2, "cumsum_forward: 2-D float32 input expected");
  at::Tensor xc = x.contiguous();
  at::Tensor out = at::empty(xc.sizes(), xc.options());
  cumsum_kernel(xc.data_ptr<float>(), out.data_ptr<float>(), xc.size(0), xc.size(1));
  return out;
}

TORCH_LIBRARY(kb_cumsum_positive_rows, m) { m.def("cumsum_forward(Tensor x) -> Tensor", &cumsum_forward); }
"""

# -fno-trapping-math lets the compiler turn branches (clamps, selects) into vector blends; it changes no result.
load_inline(
    name="kb_cumsum_positive_rows",
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
        return torch.ops.kb_cumsum_positive_rows.cumsum_forward(x)

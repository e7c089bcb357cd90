"""The shipped solution's kernel for level1/logsumexp_rows (tasks/solutions/cpu/level1/logsumexp_rows.py), built on the
fast path, and ``logsumexp_rows`` around it: the honest computation every attack in this folder starts from.
tests/test_trust_boundary.py's ``attack_source`` puts it in place of an attack's marker line; it is not a
candidate on its own (no ModelNew)."""

import torch

from kbench_env.fastpath import cpp_kernel

lse_rows = cpp_kernel(r"""
#include <cmath>
#include <cstdint>
#include <cstring>

#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__)
#define KB_MULTIVERSION __attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
#else
#define KB_MULTIVERSION
#endif
#define KB_INLINE inline __attribute__((always_inline))

// exp(x) for float32 (relative error < 1e-7) in a form the compiler vectorises: 2^n * p(r), r = x - n ln2.
KB_INLINE float exp_f(float x) {
  x = x > -87.0f ? x : -87.0f;
  x = x < 88.0f ? x : 88.0f;
  const float fx = x * 1.44269504088896341f + 0.5f;
  const int32_t ti = (int32_t)fx;
  const int32_t n = ti - ((float)ti > fx ? 1 : 0);
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

extern "C" KB_MULTIVERSION void lse_rows(const float* __restrict x, float* __restrict y, int64_t rows, int64_t cols) {
  #pragma omp parallel for schedule(static, 1)
  for (int64_t r = 0; r < rows; ++r) {
    const float* __restrict xr = x + r * cols;
    float m = -INFINITY;
    #pragma omp simd reduction(max : m)
    for (int64_t j = 0; j < cols; ++j) m = xr[j] > m ? xr[j] : m;
    float s = 0.0f;
    #pragma omp simd reduction(+ : s)
    for (int64_t j = 0; j < cols; ++j) s += exp_f(xr[j] - m);
    y[r] = (float)((double)m + std::log((double)s));
  }
}
""", "lse_rows", flags=["-O3", "-fopenmp", "-fno-trapping-math", "-fno-math-errno"])


def logsumexp_rows(x: torch.Tensor) -> torch.Tensor:
    """Row log-sum-exp of a 2-D float32 tensor with the kernel above."""
    x = x.contiguous()
    out = x.new_empty(x.shape[:1])
    lse_rows(x, out, x.shape[0], x.shape[1])
    return out

"""The fast format's one-shot example answers (formats.py), per backend: the reference ``a + b`` as an
``extern "C"`` kernel through ``kbench_env.fastpath``. Each is a complete answer; tests evaluate the CPU one."""

FAST_CPU_EXAMPLE = r'''Example: a reference program

    class Model(nn.Module):
        def forward(self, a, b):
            return a + b

and a valid answer in the fast format for the cpu backend:

```python
import torch
import torch.nn as nn
from kbench_env.fastpath import cpp_kernel

add = cpp_kernel(r"""
#include <cstdint>

extern "C" void add(const float* a, const float* b, float* out, int64_t n) {
    #pragma omp parallel for simd
    for (int64_t i = 0; i < n; ++i) out[i] = a[i] + b[i];
}
""", "add", flags=["-O3", "-fopenmp"])


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, a, b):
        a, b = a.contiguous(), b.contiguous()
        out = torch.empty_like(a)
        add(a, b, out, a.numel())
        return out
```'''

FAST_CUDA_EXAMPLE = r'''Example: a reference program

    class Model(nn.Module):
        def forward(self, a, b):
            return a + b

and a valid answer in the fast format for the cuda backend:

```python
import torch
import torch.nn as nn
from kbench_env.fastpath import cuda_kernel

add = cuda_kernel(r"""
extern "C" __global__ void add(const float* __restrict__ a, const float* __restrict__ b,
                               float* __restrict__ out, long long n) {
    long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x;
    if (i < n) out[i] = a[i] + b[i];
}
""", "add")


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, a, b):
        a, b = a.contiguous(), b.contiguous()
        out = torch.empty_like(a)
        n = a.numel()
        threads = 256
        add((n + threads - 1) // threads, threads, a, b, out, n)
        return out
```'''

FAST_EXAMPLES = {"cpu": FAST_CPU_EXAMPLE, "cuda": FAST_CUDA_EXAMPLE}

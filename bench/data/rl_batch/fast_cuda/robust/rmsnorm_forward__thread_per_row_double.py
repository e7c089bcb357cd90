"""RMSNorm candidate (fast format, CUDA): one thread per row (a naive sample), the mean square accumulated in
double, then the scaled write."""

import torch
import torch.nn as nn

from kbench_env.fastpath import cuda_kernel

SOURCE = r"""
extern "C" __global__ void rms_naive(const float* __restrict__ x, const float* __restrict__ w, float* __restrict__ y,
                                     long long rows, long long h, float eps) {
    const long long row = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (row >= rows) return;
    const float* xr = x + row * h;
    float* yr = y + row * h;
    double q = 0.0;
    for (long long c = 0; c < h; ++c) q += (double)xr[c] * xr[c];
    const double r = 1.0 / sqrt(q / (double)h + (double)eps);
    for (long long c = 0; c < h; ++c) yr[c] = (float)(xr[c] * r * w[c]);
}
"""

RMS_NAIVE = cuda_kernel(SOURCE, "rms_naive")


class ModelNew(nn.Module):
    def __init__(self, hidden: int, eps: float = 1e-6):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(1.0 + 0.5 * torch.randn(hidden))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if x.dtype != torch.float32 or self.weight.dtype != torch.float32:
            raise TypeError(f"RMSNorm: float32 input and weight expected, got {x.dtype}, {self.weight.dtype}")
        x = x.contiguous()
        w = self.weight.contiguous()
        y = torch.empty_like(x)
        h = x.shape[-1]
        rows = x.numel() // h if h else 0
        if rows == 0:
            return y
        eps = float(self.eps)
        RMS_NAIVE((rows + 63) // 64, 64, x, w, y, rows, h, eps)
        return y

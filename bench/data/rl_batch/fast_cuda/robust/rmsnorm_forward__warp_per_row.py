"""RMSNorm candidate (fast format, CUDA): one warp per row, eight rows a block, the mean square by a shuffle
reduction, then the scaled write."""

import torch
import torch.nn as nn

from kbench_env.fastpath import cuda_kernel

SOURCE = r"""
extern "C" __global__ void rms_warp(const float* __restrict__ x, const float* __restrict__ w, float* __restrict__ y,
                                    long long rows, long long h, float eps) {
    const long long row = (long long)blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32;
    if (row >= rows) return;  // whole warps leave together
    const int lane = threadIdx.x % 32;
    const float* xr = x + row * h;
    float* yr = y + row * h;
    float q = 0.f;
    for (long long c = lane; c < h; c += 32) q += xr[c] * xr[c];
    for (int o = 16; o > 0; o >>= 1) q += __shfl_xor_sync(0xffffffffu, q, o);
    const float r = rsqrtf(q / (float)h + eps);
    for (long long c = lane; c < h; c += 32) yr[c] = xr[c] * r * w[c];
}
"""

RMS_WARP = cuda_kernel(SOURCE, "rms_warp")


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
        RMS_WARP((rows + 7) // 8, 256, x, w, y, rows, h, eps)
        return y

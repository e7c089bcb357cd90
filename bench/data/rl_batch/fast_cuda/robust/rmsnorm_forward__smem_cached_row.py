"""RMSNorm candidate (fast format, CUDA): one block of 256 threads per row, the row read once into dynamic shared
memory, the sum of squares reduced across the block, the scaled write from shared memory (rows up to 12288)."""

import torch
import torch.nn as nn

from kbench_env.fastpath import cuda_kernel

SOURCE = r"""
// The block's sum, returned to every thread (blockDim.x a multiple of 32, at most 1024).
__device__ float block_sum(float v, float* sh) {
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    const int lane = threadIdx.x % 32, warp = threadIdx.x / 32, nwarps = blockDim.x / 32;
    if (lane == 0) sh[warp] = v;
    __syncthreads();
    if (warp == 0) {
        v = lane < nwarps ? sh[lane] : 0.f;
        for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
        if (lane == 0) sh[32] = v;
    }
    __syncthreads();
    const float r = sh[32];
    __syncthreads();  // sh is free again for the next reduction
    return r;
}

extern "C" __global__ void rms_smem(const float* __restrict__ x, const float* __restrict__ w, float* __restrict__ y,
                                    long long h, float eps) {
    extern __shared__ float row[];
    __shared__ float sh[33];
    const float* xr = x + (long long)blockIdx.x * h;
    float* yr = y + (long long)blockIdx.x * h;
    float q = 0.f;
    for (long long c = threadIdx.x; c < h; c += blockDim.x) { const float v = xr[c]; row[c] = v; q += v * v; }
    const float r = rsqrtf(block_sum(q, sh) / (float)h + eps);  // its barriers also publish row[]
    for (long long c = threadIdx.x; c < h; c += blockDim.x) yr[c] = row[c] * r * w[c];
}
"""

RMS_SMEM = cuda_kernel(SOURCE, "rms_smem")


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
        if h * 4 > 48 * 1024:
            raise ValueError(f"RMSNorm (shared-memory row cache): rows of at most 12288 elements, got {h}")
        RMS_SMEM(rows, 256, x, w, y, h, eps, shared_mem=h * 4)
        return y

"""RMSNorm candidate (fast format, CUDA): two kernels. One block per row writes 1/rms to a float32 buffer
(block reduction through shuffles and shared memory); a 2D elementwise kernel then scales by it and the weight."""

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

extern "C" __global__ void rms_rstd(const float* __restrict__ x, float* __restrict__ rstd, long long h, float eps) {
    __shared__ float sh[33];
    const float* xr = x + (long long)blockIdx.x * h;
    float q = 0.f;
    for (long long c = threadIdx.x; c < h; c += blockDim.x) { const float v = xr[c]; q += v * v; }
    q = block_sum(q, sh);
    if (threadIdx.x == 0) rstd[blockIdx.x] = rsqrtf(q / (float)h + eps);
}

extern "C" __global__ void rms_scale(const float* __restrict__ x, const float* __restrict__ rstd,
                                     const float* __restrict__ w, float* __restrict__ y, long long rows, long long h) {
    const long long c = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (c >= h) return;
    const float wc = w[c];
    for (long long r = blockIdx.y; r < rows; r += gridDim.y) y[r * h + c] = x[r * h + c] * rstd[r] * wc;
}
"""

RMS_RSTD, RMS_SCALE = cuda_kernel(SOURCE, "rms_rstd"), cuda_kernel(SOURCE, "rms_scale")


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
        rstd = torch.empty(rows, dtype=torch.float32, device=x.device)
        RMS_RSTD(rows, 512, x, rstd, h, eps)
        RMS_SCALE(((h + 127) // 128, min(rows, 65535)), 128, x, rstd, w, y, rows, h)
        return y

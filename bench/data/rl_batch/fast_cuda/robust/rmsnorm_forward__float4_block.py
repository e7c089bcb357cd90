"""RMSNorm candidate (fast format, CUDA): one block of 256 threads per row; rows whose length is a multiple of 4
(each row then starts 16-byte aligned) are read and written as float4, other rows element by element."""

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

extern "C" __global__ void rms_f4(const float* __restrict__ x, const float* __restrict__ w, float* __restrict__ y,
                                  long long h, float eps) {
    __shared__ float sh[33];
    const long long n4 = h / 4;
    const float4* xr = reinterpret_cast<const float4*>(x + (long long)blockIdx.x * h);
    const float4* w4 = reinterpret_cast<const float4*>(w);
    float4* yr = reinterpret_cast<float4*>(y + (long long)blockIdx.x * h);
    float q = 0.f;
    for (long long c = threadIdx.x; c < n4; c += blockDim.x) {
        const float4 v = xr[c];
        q += v.x * v.x + v.y * v.y + v.z * v.z + v.w * v.w;
    }
    const float r = rsqrtf(block_sum(q, sh) / (float)h + eps);
    for (long long c = threadIdx.x; c < n4; c += blockDim.x) {
        const float4 v = xr[c], g = w4[c];
        yr[c] = make_float4(v.x * r * g.x, v.y * r * g.y, v.z * r * g.z, v.w * r * g.w);
    }
}

extern "C" __global__ void rms_scalar(const float* __restrict__ x, const float* __restrict__ w, float* __restrict__ y,
                                      long long h, float eps) {
    __shared__ float sh[33];
    const float* xr = x + (long long)blockIdx.x * h;
    float* yr = y + (long long)blockIdx.x * h;
    float q = 0.f;
    for (long long c = threadIdx.x; c < h; c += blockDim.x) { const float v = xr[c]; q += v * v; }
    const float r = rsqrtf(block_sum(q, sh) / (float)h + eps);
    for (long long c = threadIdx.x; c < h; c += blockDim.x) yr[c] = xr[c] * r * w[c];
}
"""

RMS_F4, RMS_SCALAR = cuda_kernel(SOURCE, "rms_f4"), cuda_kernel(SOURCE, "rms_scalar")


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
        aligned = x.data_ptr() % 16 == 0 and y.data_ptr() % 16 == 0 and w.data_ptr() % 16 == 0
        if h % 4 == 0 and aligned:
            RMS_F4(rows, 256, x, w, y, h, eps)
        else:
            RMS_SCALAR(rows, 256, x, w, y, h, eps)
        return y

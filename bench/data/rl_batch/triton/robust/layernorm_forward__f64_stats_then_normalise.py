"""LayerNorm candidate (Triton): unfused, two kernels. Statistics: one program per row, a single sweep of sum
and sum of squares in float64 (no cancellation at these magnitudes), mean and 1/std stored as float32.
Normalisation: a 2-D grid (row, 1024-column block), each program one chunk of one row."""

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def stats_f64_kernel(x_ptr, mean_ptr, rstd_ptr, H, eps, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    s1 = tl.zeros([BLOCK], dtype=tl.float64)
    s2 = tl.zeros([BLOCK], dtype=tl.float64)
    for start in range(0, H, BLOCK):
        cols = start + tl.arange(0, BLOCK)
        x = tl.load(x_ptr + row * H + cols, mask=cols < H, other=0.0).to(tl.float32).to(tl.float64)
        s1 += x
        s2 += x * x
    mean = tl.sum(s1, axis=0) / H
    var = tl.sum(s2, axis=0) / H - mean * mean
    tl.store(mean_ptr + row, mean.to(tl.float32))
    tl.store(rstd_ptr + row, (1.0 / tl.sqrt(var + eps)).to(tl.float32))


@triton.jit
def normalise_kernel(x_ptr, mean_ptr, rstd_ptr, w_ptr, b_ptr, y_ptr, H, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    cols = tl.program_id(1) * BLOCK + tl.arange(0, BLOCK)
    mask = cols < H
    mean = tl.load(mean_ptr + row)
    rstd = tl.load(rstd_ptr + row)
    x = tl.load(x_ptr + row * H + cols, mask=mask, other=0.0).to(tl.float32)
    w = tl.load(w_ptr + cols, mask=mask, other=0.0).to(tl.float32)
    b = tl.load(b_ptr + cols, mask=mask, other=0.0).to(tl.float32)
    tl.store(y_ptr + row * H + cols, ((x - mean) * rstd * w + b).to(y_ptr.dtype.element_ty), mask=mask)


class ModelNew(nn.Module):
    def __init__(self, hidden: int, eps: float = 1e-5):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(1.0 + 0.5 * torch.randn(hidden))
        self.bias = nn.Parameter(0.5 * torch.randn(hidden))

    def forward(self, x):
        x = x.contiguous()
        y = torch.empty_like(x)
        H = x.shape[-1]
        R = x.numel() // H if H else 0
        if R:
            mean = torch.empty(R, dtype=torch.float32, device=x.device)
            rstd = torch.empty(R, dtype=torch.float32, device=x.device)
            stats_f64_kernel[(R,)](x, mean, rstd, H, self.eps, BLOCK=512, num_warps=4)
            normalise_kernel[(R, triton.cdiv(H, 1024))](x, mean, rstd, self.weight, self.bias, y, H, BLOCK=1024)
        return y

"""LayerNorm candidate (Triton): one program per row, a single statistics sweep of sum and sum of squares in
float32 over 2048-element chunks (variance as E[x^2] - mean^2, clamped at 0), 8 warps, then the affine sweep."""

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def layernorm_sumsq_kernel(x_ptr, w_ptr, b_ptr, y_ptr, H, eps, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    s1 = tl.zeros([BLOCK], dtype=tl.float32)
    s2 = tl.zeros([BLOCK], dtype=tl.float32)
    for start in range(0, H, BLOCK):
        cols = start + tl.arange(0, BLOCK)
        x = tl.load(x_ptr + row * H + cols, mask=cols < H, other=0.0).to(tl.float32)
        s1 += x
        s2 += x * x
    mean = tl.sum(s1, axis=0) / H
    var = tl.maximum(tl.sum(s2, axis=0) / H - mean * mean, 0.0)
    rstd = tl.rsqrt(var + eps)
    shift = -mean * rstd
    for start in range(0, H, BLOCK):
        cols = start + tl.arange(0, BLOCK)
        mask = cols < H
        x = tl.load(x_ptr + row * H + cols, mask=mask, other=0.0).to(tl.float32)
        w = tl.load(w_ptr + cols, mask=mask, other=0.0).to(tl.float32)
        b = tl.load(b_ptr + cols, mask=mask, other=0.0).to(tl.float32)
        tl.store(y_ptr + row * H + cols, ((x * rstd + shift) * w + b).to(y_ptr.dtype.element_ty), mask=mask)


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
            layernorm_sumsq_kernel[(R,)](x, self.weight, self.bias, y, H, self.eps, BLOCK=2048, num_warps=8)
        return y

"""LayerNorm candidate (Triton): one program per row, sums of x and of (x - mean)^2 accumulated in float64 over
256-element chunks (exact statistics whatever the row's offset), normalisation in float32."""

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def layer_norm_f64_kernel(x_ptr, w_ptr, b_ptr, y_ptr, H, eps, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    x_row = x_ptr + row * H
    acc = tl.zeros([BLOCK], dtype=tl.float64)
    for start in range(0, H, BLOCK):
        cols = start + tl.arange(0, BLOCK)
        acc += tl.load(x_row + cols, mask=cols < H, other=0.0).to(tl.float32).to(tl.float64)
    mean = tl.sum(acc, axis=0) / H
    acc = tl.zeros([BLOCK], dtype=tl.float64)
    for start in range(0, H, BLOCK):
        cols = start + tl.arange(0, BLOCK)
        mask = cols < H
        d = tl.where(mask, tl.load(x_row + cols, mask=mask, other=0.0).to(tl.float32).to(tl.float64) - mean, 0.0)
        acc += d * d
    rstd = (1.0 / tl.sqrt(tl.sum(acc, axis=0) / H + eps)).to(tl.float32)
    mean32 = mean.to(tl.float32)
    for start in range(0, H, BLOCK):
        cols = start + tl.arange(0, BLOCK)
        mask = cols < H
        x = tl.load(x_row + cols, mask=mask, other=0.0).to(tl.float32)
        w = tl.load(w_ptr + cols, mask=mask, other=0.0).to(tl.float32)
        b = tl.load(b_ptr + cols, mask=mask, other=0.0).to(tl.float32)
        tl.store(y_ptr + row * H + cols, ((x - mean32) * rstd * w + b).to(y_ptr.dtype.element_ty), mask=mask)


class ModelNew(nn.Module):
    def __init__(self, hidden: int, eps: float = 1e-5):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(1.0 + 0.5 * torch.randn(hidden))
        self.bias = nn.Parameter(0.5 * torch.randn(hidden))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        y = torch.empty_like(x)
        H = x.shape[-1]
        rows = x.numel() // H if H else 0
        if rows:
            layer_norm_f64_kernel[(rows,)](x, self.weight, self.bias, y, H, self.eps, BLOCK=256, num_warps=2)
        return y

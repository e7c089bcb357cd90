"""LayerNorm candidate (Triton): one program per row, a single statistics sweep of sum and sum of squares of the
row shifted by its first element (the shift keeps E[x^2] - E[x]^2 from cancelling for rows with a large offset),
chunks of 1024, then the normalising sweep."""

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def layer_norm_shifted_kernel(x_ptr, w_ptr, b_ptr, y_ptr, H, eps, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    x_row = x_ptr + row * H
    shift = tl.load(x_row).to(tl.float32)
    s1 = tl.zeros([BLOCK], dtype=tl.float32)
    s2 = tl.zeros([BLOCK], dtype=tl.float32)
    for start in range(0, H, BLOCK):
        cols = start + tl.arange(0, BLOCK)
        mask = cols < H
        d = tl.where(mask, tl.load(x_row + cols, mask=mask, other=0.0).to(tl.float32) - shift, 0.0)
        s1 += d
        s2 += d * d
    m_shift = tl.sum(s1, axis=0) / H
    var = tl.maximum(tl.sum(s2, axis=0) / H - m_shift * m_shift, 0.0)
    mean = shift + m_shift
    rstd = tl.rsqrt(var + eps)
    for start in range(0, H, BLOCK):
        cols = start + tl.arange(0, BLOCK)
        mask = cols < H
        x = tl.load(x_row + cols, mask=mask, other=0.0).to(tl.float32)
        w = tl.load(w_ptr + cols, mask=mask, other=0.0).to(tl.float32)
        b = tl.load(b_ptr + cols, mask=mask, other=0.0).to(tl.float32)
        tl.store(y_ptr + row * H + cols, ((x - mean) * rstd * w + b).to(y_ptr.dtype.element_ty), mask=mask)


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
            layer_norm_shifted_kernel[(rows,)](x, self.weight, self.bias, y, H, self.eps, BLOCK=1024, num_warps=4)
        return y

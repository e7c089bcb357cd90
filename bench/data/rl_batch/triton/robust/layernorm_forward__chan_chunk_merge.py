"""LayerNorm candidate (Triton): one program per row; each 512-element chunk's mean and M2 are computed exactly
and merged into the row's running (count, mean, M2) with Chan's parallel formula; then the normalising sweep."""

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def layernorm_chan_kernel(x_ptr, w_ptr, b_ptr, y_ptr, H, eps, BLOCK: tl.constexpr):
    x_row = x_ptr + tl.program_id(0).to(tl.int64) * H
    y_row = y_ptr + tl.program_id(0).to(tl.int64) * H
    n = 0.0
    mean = 0.0
    m2 = 0.0
    for start in range(0, H, BLOCK):
        cols = start + tl.arange(0, BLOCK)
        mask = cols < H
        x = tl.load(x_row + cols, mask=mask, other=0.0).to(tl.float32)
        nb = tl.sum(mask.to(tl.float32), axis=0)
        mb = tl.sum(x, axis=0) / nb
        d = tl.where(mask, x - mb, 0.0)
        m2b = tl.sum(d * d, axis=0)
        tot = n + nb
        delta = mb - mean
        mean = mean + delta * (nb / tot)
        m2 = m2 + m2b + delta * delta * (n * nb / tot)
        n = tot
    rstd = 1.0 / tl.sqrt(m2 / H + eps)
    for start in range(0, H, BLOCK):
        cols = start + tl.arange(0, BLOCK)
        mask = cols < H
        x = tl.load(x_row + cols, mask=mask, other=0.0).to(tl.float32)
        w = tl.load(w_ptr + cols, mask=mask, other=0.0).to(tl.float32)
        b = tl.load(b_ptr + cols, mask=mask, other=0.0).to(tl.float32)
        tl.store(y_row + cols, ((x - mean) * rstd * w + b).to(y_ptr.dtype.element_ty), mask=mask)


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
            layernorm_chan_kernel[(R,)](x, self.weight, self.bias, y, H, self.eps, BLOCK=512, num_warps=4)
        return y

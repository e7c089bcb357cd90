"""LayerNorm candidate (Triton): one program per row, Welford's running mean and M2 kept per lane over
512-element chunks, the lanes merged with Chan's pairwise formula; a second sweep normalises and applies the
affine transform."""

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def layer_norm_welford_kernel(x_ptr, w_ptr, b_ptr, y_ptr, H, eps, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    x_row = x_ptr + row * H
    cnt = tl.zeros([BLOCK], dtype=tl.float32)
    mean = tl.zeros([BLOCK], dtype=tl.float32)
    m2 = tl.zeros([BLOCK], dtype=tl.float32)
    for start in range(0, H, BLOCK):
        cols = start + tl.arange(0, BLOCK)
        mask = cols < H
        x = tl.load(x_row + cols, mask=mask, other=0.0).to(tl.float32)
        new_cnt = cnt + mask.to(tl.float32)
        delta = tl.where(mask, x - mean, 0.0)
        mean += delta / tl.maximum(new_cnt, 1.0)
        m2 += delta * tl.where(mask, x - mean, 0.0)
        cnt = new_cnt
    row_mean = tl.sum(cnt * mean, axis=0) / H
    dm = mean - row_mean
    var = (tl.sum(m2, axis=0) + tl.sum(cnt * dm * dm, axis=0)) / H
    rstd = 1.0 / tl.sqrt(var + eps)
    for start in range(0, H, BLOCK):
        cols = start + tl.arange(0, BLOCK)
        mask = cols < H
        x = tl.load(x_row + cols, mask=mask, other=0.0).to(tl.float32)
        w = tl.load(w_ptr + cols, mask=mask, other=0.0).to(tl.float32)
        b = tl.load(b_ptr + cols, mask=mask, other=0.0).to(tl.float32)
        tl.store(y_ptr + row * H + cols, ((x - row_mean) * rstd * w + b).to(y_ptr.dtype.element_ty), mask=mask)


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
            layer_norm_welford_kernel[(rows,)](x, self.weight, self.bias, y, H, self.eps, BLOCK=512, num_warps=4)
        return y

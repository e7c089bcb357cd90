"""LayerNorm candidate (Triton): two kernels, unfused. The first (a program per row, two-pass over 1024-element
chunks) writes each row's mean and 1/std to a float32 buffer; the second applies (x - mean) * rstd * w + b over
2-D tiles of 8 rows x 256 columns."""

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def row_stats_kernel(x_ptr, mean_ptr, rstd_ptr, H, eps, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    acc = tl.zeros([BLOCK], dtype=tl.float32)
    for start in range(0, H, BLOCK):
        cols = start + tl.arange(0, BLOCK)
        acc += tl.load(x_ptr + row * H + cols, mask=cols < H, other=0.0).to(tl.float32)
    mean = tl.sum(acc, axis=0) / H
    acc = tl.zeros([BLOCK], dtype=tl.float32)
    for start in range(0, H, BLOCK):
        cols = start + tl.arange(0, BLOCK)
        mask = cols < H
        d = tl.where(mask, tl.load(x_ptr + row * H + cols, mask=mask, other=0.0).to(tl.float32) - mean, 0.0)
        acc += d * d
    tl.store(mean_ptr + row, mean)
    tl.store(rstd_ptr + row, 1.0 / tl.sqrt(tl.sum(acc, axis=0) / H + eps))


@triton.jit
def affine_kernel(x_ptr, mean_ptr, rstd_ptr, w_ptr, b_ptr, y_ptr, R, H, BLOCK_R: tl.constexpr, BLOCK_H: tl.constexpr):
    rows = tl.program_id(0).to(tl.int64) * BLOCK_R + tl.arange(0, BLOCK_R)
    cols = tl.program_id(1) * BLOCK_H + tl.arange(0, BLOCK_H)
    rmask = rows < R
    cmask = cols < H
    mask = rmask[:, None] & cmask[None, :]
    mean = tl.load(mean_ptr + rows, mask=rmask, other=0.0)
    rstd = tl.load(rstd_ptr + rows, mask=rmask, other=0.0)
    w = tl.load(w_ptr + cols, mask=cmask, other=0.0).to(tl.float32)
    b = tl.load(b_ptr + cols, mask=cmask, other=0.0).to(tl.float32)
    idx = rows[:, None] * H + cols[None, :]
    x = tl.load(x_ptr + idx, mask=mask, other=0.0).to(tl.float32)
    y = (x - mean[:, None]) * rstd[:, None] * w[None, :] + b[None, :]
    tl.store(y_ptr + idx, y.to(y_ptr.dtype.element_ty), mask=mask)


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
        R = x.numel() // H if H else 0
        if R:
            stats = torch.empty((2, R), dtype=torch.float32, device=x.device)
            row_stats_kernel[(R,)](x, stats[0], stats[1], H, self.eps, BLOCK=1024, num_warps=4)
            grid = (triton.cdiv(R, 8), triton.cdiv(H, 256))
            affine_kernel[grid](x, stats[0], stats[1], self.weight, self.bias, y, R, H, BLOCK_R=8, BLOCK_H=256)
        return y

"""LayerNorm candidate (Triton): each program owns 4 rows as a [4, 256] tile and sweeps the columns twice for an
exact mean and variance per row, then a third time for the affine store; masks on rows and columns."""

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def layernorm_tile_kernel(x_ptr, w_ptr, b_ptr, y_ptr, R, H, eps, BLOCK_R: tl.constexpr, BLOCK_H: tl.constexpr):
    rows = tl.program_id(0).to(tl.int64) * BLOCK_R + tl.arange(0, BLOCK_R)
    rmask = rows < R
    acc = tl.zeros([BLOCK_R, BLOCK_H], dtype=tl.float32)
    for start in range(0, H, BLOCK_H):
        cols = start + tl.arange(0, BLOCK_H)
        mask = rmask[:, None] & (cols[None, :] < H)
        acc += tl.load(x_ptr + rows[:, None] * H + cols[None, :], mask=mask, other=0.0).to(tl.float32)
    mean = tl.sum(acc, axis=1) / H
    acc = tl.zeros([BLOCK_R, BLOCK_H], dtype=tl.float32)
    for start in range(0, H, BLOCK_H):
        cols = start + tl.arange(0, BLOCK_H)
        mask = rmask[:, None] & (cols[None, :] < H)
        x = tl.load(x_ptr + rows[:, None] * H + cols[None, :], mask=mask, other=0.0).to(tl.float32)
        d = tl.where(mask, x - mean[:, None], 0.0)
        acc += d * d
    rstd = 1.0 / tl.sqrt(tl.sum(acc, axis=1) / H + eps)
    for start in range(0, H, BLOCK_H):
        cols = start + tl.arange(0, BLOCK_H)
        cmask = cols < H
        mask = rmask[:, None] & cmask[None, :]
        idx = rows[:, None] * H + cols[None, :]
        x = tl.load(x_ptr + idx, mask=mask, other=0.0).to(tl.float32)
        w = tl.load(w_ptr + cols, mask=cmask, other=0.0).to(tl.float32)
        b = tl.load(b_ptr + cols, mask=cmask, other=0.0).to(tl.float32)
        y = (x - mean[:, None]) * rstd[:, None] * w[None, :] + b[None, :]
        tl.store(y_ptr + idx, y.to(y_ptr.dtype.element_ty), mask=mask)


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
            layernorm_tile_kernel[(triton.cdiv(R, 4),)](x, self.weight, self.bias, y, R, H, self.eps,
                                                        BLOCK_R=4, BLOCK_H=256, num_warps=4)
        return y

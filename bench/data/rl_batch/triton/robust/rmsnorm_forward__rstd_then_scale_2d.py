"""RMSNorm candidate (Triton): unfused, two kernels: one program per row writes 1/rms to a float32
buffer; a second kernel scales the matrix in 2-D tiles of 16 rows x 128 columns."""

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def rstd_kernel(x_ptr, r_ptr, H, eps, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    acc = tl.zeros([BLOCK], dtype=tl.float32)
    for start in range(0, H, BLOCK):
        cols = start + tl.arange(0, BLOCK)
        x = tl.load(x_ptr + row * H + cols, mask=cols < H, other=0.0).to(tl.float32)
        acc += x * x
    tl.store(r_ptr + row, tl.rsqrt(tl.sum(acc, axis=0) / H + eps))


@triton.jit
def scale_kernel(x_ptr, r_ptr, w_ptr, y_ptr, R, H, BLOCK_R: tl.constexpr, BLOCK_H: tl.constexpr):
    rows = tl.program_id(0).to(tl.int64) * BLOCK_R + tl.arange(0, BLOCK_R)
    cols = tl.program_id(1) * BLOCK_H + tl.arange(0, BLOCK_H)
    rmask = rows < R
    cmask = cols < H
    mask = rmask[:, None] & cmask[None, :]
    idx = rows[:, None] * H + cols[None, :]
    x = tl.load(x_ptr + idx, mask=mask, other=0.0).to(tl.float32)
    r = tl.load(r_ptr + rows, mask=rmask, other=0.0)
    w = tl.load(w_ptr + cols, mask=cmask, other=0.0).to(tl.float32)
    tl.store(y_ptr + idx, (x * r[:, None] * w[None, :]).to(y_ptr.dtype.element_ty), mask=mask)


class ModelNew(nn.Module):
    def __init__(self, hidden: int, eps: float = 1e-6):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(1.0 + 0.5 * torch.randn(hidden))

    def forward(self, x):
        x = x.contiguous()
        y = torch.empty_like(x)
        H = x.shape[-1]
        R = x.numel() // H if H else 0
        if R:
            r = torch.empty(R, dtype=torch.float32, device=x.device)
            rstd_kernel[(R,)](x, r, H, self.eps, BLOCK=2048, num_warps=8)
            scale_kernel[(triton.cdiv(R, 16), triton.cdiv(H, 128))](x, r, self.weight, y, R, H, BLOCK_R=16, BLOCK_H=128)
        return y

"""Sum-over-dim1 candidate (Triton): one program per (batch, 256-column block), 8 rows per step, each column's
running sum kept with Kahan compensation in float32 (the lost low-order bits carried to the next step)."""

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def sum_kahan_kernel(x_ptr, y_ptr, N, D, BLOCK_N: tl.constexpr, BLOCK_D: tl.constexpr):
    b = tl.program_id(0).to(tl.int64)
    cols = tl.program_id(1) * BLOCK_D + tl.arange(0, BLOCK_D)
    cmask = cols < D
    s = tl.zeros([BLOCK_D], dtype=tl.float32)
    comp = tl.zeros([BLOCK_D], dtype=tl.float32)
    for n0 in range(0, N, BLOCK_N):
        rows = n0 + tl.arange(0, BLOCK_N)
        mask = (rows[:, None] < N) & cmask[None, :]
        tile = tl.load(x_ptr + b * N * D + rows[:, None] * D + cols[None, :], mask=mask, other=0.0)
        v = tl.sum(tile.to(tl.float32), axis=0) - comp
        t = s + v
        comp = (t - s) - v
        s = t
    tl.store(y_ptr + b * D + cols, s.to(y_ptr.dtype.element_ty), mask=cmask)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        B, N, D = x.shape
        y = torch.empty((B, 1, D), dtype=x.dtype, device=x.device)
        if B and D:
            sum_kahan_kernel[(B, triton.cdiv(D, 256))](x, y, N, D, BLOCK_N=8, BLOCK_D=256, num_warps=8)
        return y

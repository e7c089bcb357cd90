"""Sum-over-dim1 candidate (Triton): one program per (batch, 64-column block) accumulating 2-D tiles of 32 rows x
64 columns in float32 and reducing the tile along its rows once at the end."""

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def sum_tile_kernel(x_ptr, y_ptr, N, D, BLOCK_N: tl.constexpr, BLOCK_D: tl.constexpr):
    b = tl.program_id(0).to(tl.int64)
    cols = tl.program_id(1) * BLOCK_D + tl.arange(0, BLOCK_D)
    cmask = cols < D
    acc = tl.zeros([BLOCK_N, BLOCK_D], dtype=tl.float32)
    for n0 in range(0, N, BLOCK_N):
        rows = n0 + tl.arange(0, BLOCK_N)
        mask = (rows[:, None] < N) & cmask[None, :]
        acc += tl.load(x_ptr + b * N * D + rows[:, None] * D + cols[None, :], mask=mask, other=0.0).to(tl.float32)
    tl.store(y_ptr + b * D + cols, tl.sum(acc, axis=0).to(y_ptr.dtype.element_ty), mask=cmask)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        B, N, D = x.shape
        y = torch.empty((B, 1, D), dtype=x.dtype, device=x.device)
        if B and D:
            sum_tile_kernel[(B, triton.cdiv(D, 64))](x, y, N, D, BLOCK_N=32, BLOCK_D=64, num_warps=4)
        return y

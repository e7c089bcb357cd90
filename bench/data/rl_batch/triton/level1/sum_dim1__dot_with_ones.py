"""Sum-over-dim1 candidate (Triton): the column sums as a matrix product, ones[16, 32] @ x[b, 32 rows, 64 columns]
with tl.dot in IEEE float32 (no TF32) accumulated over the reduced dimension; row 0 of the 16 identical product
rows is stored."""

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def sum_dot_kernel(x_ptr, y_ptr, N, D, BLOCK_N: tl.constexpr, BLOCK_D: tl.constexpr):
    b = tl.program_id(0).to(tl.int64)
    cols = tl.program_id(1) * BLOCK_D + tl.arange(0, BLOCK_D)
    cmask = cols < D
    ones = tl.full([16, BLOCK_N], 1.0, tl.float32)
    acc = tl.zeros([16, BLOCK_D], dtype=tl.float32)
    for n0 in range(0, N, BLOCK_N):
        rows = n0 + tl.arange(0, BLOCK_N)
        mask = (rows[:, None] < N) & cmask[None, :]
        tile = tl.load(x_ptr + b * N * D + rows[:, None] * D + cols[None, :], mask=mask, other=0.0)
        acc = tl.dot(ones, tile.to(tl.float32), acc, input_precision="ieee")
    first = tl.arange(0, 16)[:, None] == 0
    out = tl.sum(tl.where(first, acc, 0.0), axis=0)
    tl.store(y_ptr + b * D + cols, out.to(y_ptr.dtype.element_ty), mask=cmask)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        B, N, D = x.shape
        y = torch.empty((B, 1, D), dtype=x.dtype, device=x.device)
        if B and D:
            sum_dot_kernel[(B, triton.cdiv(D, 64))](x, y, N, D, BLOCK_N=32, BLOCK_D=64, num_warps=4)
        return y

"""Row softmax candidate (Triton): two kernels. The first, a program per row, writes the row's maximum and the
reciprocal of its exponential sum (float32) to a small buffer; the second normalises the matrix in 2-D tiles of
4 rows x 1024 columns, reading the two statistics per row."""

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def row_stats_kernel(x_ptr, max_ptr, inv_ptr, C, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    m = tl.full([BLOCK], float("-inf"), tl.float32)
    for start in range(0, C, BLOCK):
        cols = start + tl.arange(0, BLOCK)
        m = tl.maximum(m, tl.load(x_ptr + row * C + cols, mask=cols < C, other=float("-inf")).to(tl.float32))
    m_row = tl.max(m, axis=0)
    s = tl.zeros([BLOCK], dtype=tl.float32)
    for start in range(0, C, BLOCK):
        cols = start + tl.arange(0, BLOCK)
        x = tl.load(x_ptr + row * C + cols, mask=cols < C, other=float("-inf")).to(tl.float32)
        s += tl.exp(x - m_row)
    tl.store(max_ptr + row, m_row)
    tl.store(inv_ptr + row, 1.0 / tl.sum(s, axis=0))


@triton.jit
def normalise_kernel(x_ptr, max_ptr, inv_ptr, y_ptr, R, C, BLOCK_R: tl.constexpr, BLOCK_C: tl.constexpr):
    rows = tl.program_id(0).to(tl.int64) * BLOCK_R + tl.arange(0, BLOCK_R)
    cols = tl.program_id(1) * BLOCK_C + tl.arange(0, BLOCK_C)
    rmask = rows < R
    mask = rmask[:, None] & (cols[None, :] < C)
    m = tl.load(max_ptr + rows, mask=rmask, other=0.0)
    inv = tl.load(inv_ptr + rows, mask=rmask, other=0.0)
    idx = rows[:, None] * C + cols[None, :]
    x = tl.load(x_ptr + idx, mask=mask, other=0.0).to(tl.float32)
    y = tl.exp(x - m[:, None]) * inv[:, None]
    tl.store(y_ptr + idx, y.to(y_ptr.dtype.element_ty), mask=mask)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        y = torch.empty_like(x)
        R, C = x.shape
        if R and C:
            stats = torch.empty((2, R), dtype=torch.float32, device=x.device)
            row_stats_kernel[(R,)](x, stats[0], stats[1], C, BLOCK=min(1024, triton.next_power_of_2(C)))
            grid = (triton.cdiv(R, 4), triton.cdiv(C, 1024))
            normalise_kernel[grid](x, stats[0], stats[1], y, R, C, BLOCK_R=4, BLOCK_C=1024, num_warps=4)
        return y

"""Row softmax candidate (Triton): each program owns 4 rows as a 2-D tile [4, 512] and sweeps the columns with a
per-lane online maximum and rescaled sum (float32), reduced along the columns at the end; a second sweep
writes the 4 rows."""

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def softmax_rows_tile_kernel(x_ptr, y_ptr, R, C, BLOCK_R: tl.constexpr, BLOCK_C: tl.constexpr):
    rows = tl.program_id(0).to(tl.int64) * BLOCK_R + tl.arange(0, BLOCK_R)
    rmask = rows < R
    m = tl.full([BLOCK_R, BLOCK_C], float("-inf"), tl.float32)
    s = tl.zeros([BLOCK_R, BLOCK_C], dtype=tl.float32)
    for start in range(0, C, BLOCK_C):
        cols = start + tl.arange(0, BLOCK_C)
        mask = rmask[:, None] & (cols[None, :] < C)
        x = tl.load(x_ptr + rows[:, None] * C + cols[None, :], mask=mask, other=float("-inf")).to(tl.float32)
        m_new = tl.maximum(m, x)
        live = m_new > float("-inf")
        safe = tl.where(live, m_new, 0.0)
        s = tl.where(live, s * tl.exp(m - safe) + tl.exp(x - safe), 0.0)
        m = m_new
    m_row = tl.max(m, axis=1)
    m_safe = tl.where(m_row > float("-inf"), m_row, 0.0)
    s_row = tl.sum(tl.where(m > float("-inf"), s * tl.exp(m - m_safe[:, None]), 0.0), axis=1)
    inv = 1.0 / tl.where(rmask, s_row, 1.0)
    for start in range(0, C, BLOCK_C):
        cols = start + tl.arange(0, BLOCK_C)
        mask = rmask[:, None] & (cols[None, :] < C)
        idx = rows[:, None] * C + cols[None, :]
        x = tl.load(x_ptr + idx, mask=mask, other=0.0).to(tl.float32)
        y = tl.exp(x - m_safe[:, None]) * inv[:, None]
        tl.store(y_ptr + idx, y.to(y_ptr.dtype.element_ty), mask=mask)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        y = torch.empty_like(x)
        R, C = x.shape
        if R and C:
            softmax_rows_tile_kernel[(triton.cdiv(R, 4),)](x, y, R, C, BLOCK_R=4, BLOCK_C=512, num_warps=4)
        return y

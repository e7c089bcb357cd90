"""Row softmax candidate (Triton): one program per row, an online per-lane maximum and sum over 4096-element
chunks with exp2 ((x - max) * log2(e), the difference taken before scaling), 8 warps; the second sweep writes
exp2((x - max) * log2 e) / sum."""

import torch
import torch.nn as nn
import triton
import triton.language as tl

LOG2E = 1.4426950408889634


@triton.jit
def softmax_exp2_kernel(x_ptr, y_ptr, C, LOG2E: tl.constexpr, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    x_row = x_ptr + row * C
    m = tl.full([BLOCK], -3.0e38, tl.float32)
    s = tl.zeros([BLOCK], dtype=tl.float32)
    for start in range(0, C, BLOCK):
        cols = start + tl.arange(0, BLOCK)
        mask = cols < C
        x = tl.load(x_row + cols, mask=mask, other=-3.0e38).to(tl.float32)
        m_new = tl.maximum(m, x)
        s = s * tl.exp2((m - m_new) * LOG2E) + tl.where(mask, tl.exp2((x - m_new) * LOG2E), 0.0)
        m = m_new
    m_row = tl.max(m, axis=0)
    s_row = tl.sum(s * tl.exp2((m - m_row) * LOG2E), axis=0)
    inv = 1.0 / s_row
    for start in range(0, C, BLOCK):
        cols = start + tl.arange(0, BLOCK)
        mask = cols < C
        x = tl.load(x_row + cols, mask=mask, other=0.0).to(tl.float32)
        y = tl.exp2((x - m_row) * LOG2E) * inv
        tl.store(y_ptr + row * C + cols, y.to(y_ptr.dtype.element_ty), mask=mask)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        y = torch.empty_like(x)
        rows, C = x.shape
        if rows and C:
            softmax_exp2_kernel[(rows,)](x, y, C, LOG2E=LOG2E, BLOCK=4096, num_warps=8)
        return y

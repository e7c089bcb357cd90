"""Row softmax candidate (Triton): one program per row; the first sweep keeps a scalar running maximum and a sum
rescaled whenever the maximum grows (online softmax, chunks of 2048), the second writes exp(x - max) / sum."""

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def softmax_online_kernel(x_ptr, y_ptr, C, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    m = float("-inf")
    s = 0.0
    for start in range(0, C, BLOCK):
        cols = start + tl.arange(0, BLOCK)
        x = tl.load(x_ptr + row * C + cols, mask=cols < C, other=float("-inf")).to(tl.float32)
        m_new = tl.maximum(m, tl.max(x, axis=0))
        s = s * tl.exp(m - m_new) + tl.sum(tl.exp(x - m_new), axis=0)
        m = m_new
    inv = 1.0 / s
    for start in range(0, C, BLOCK):
        cols = start + tl.arange(0, BLOCK)
        mask = cols < C
        x = tl.load(x_ptr + row * C + cols, mask=mask, other=0.0).to(tl.float32)
        tl.store(y_ptr + row * C + cols, (tl.exp(x - m) * inv).to(y_ptr.dtype.element_ty), mask=mask)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        y = torch.empty_like(x)
        rows, C = x.shape
        if rows and C:
            softmax_online_kernel[(rows,)](x, y, C, BLOCK=min(2048, triton.next_power_of_2(C)), num_warps=8)
        return y

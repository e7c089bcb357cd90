"""Row softmax candidate (Triton): one program per row, three sweeps over the row in 1024-element chunks: the
row maximum (reduced per chunk to a scalar), the sum of exp(x - max), then the normalised store."""

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def softmax_three_pass_kernel(x_ptr, y_ptr, C, BLOCK: tl.constexpr):
    x_row = x_ptr + tl.program_id(0).to(tl.int64) * C
    y_row = y_ptr + tl.program_id(0).to(tl.int64) * C
    m = float("-inf")
    for start in range(0, C, BLOCK):
        cols = start + tl.arange(0, BLOCK)
        x = tl.load(x_row + cols, mask=cols < C, other=float("-inf")).to(tl.float32)
        m = tl.maximum(m, tl.max(x, axis=0))
    s = 0.0
    for start in range(0, C, BLOCK):
        cols = start + tl.arange(0, BLOCK)
        x = tl.load(x_row + cols, mask=cols < C, other=float("-inf")).to(tl.float32)
        s += tl.sum(tl.exp(x - m), axis=0)
    for start in range(0, C, BLOCK):
        cols = start + tl.arange(0, BLOCK)
        mask = cols < C
        x = tl.load(x_row + cols, mask=mask, other=float("-inf")).to(tl.float32)
        tl.store(y_row + cols, (tl.exp(x - m) / s).to(y_ptr.dtype.element_ty), mask=mask)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        y = torch.empty_like(x)
        rows, C = x.shape
        if rows and C:
            softmax_three_pass_kernel[(rows,)](x, y, C, BLOCK=1024, num_warps=4)
        return y

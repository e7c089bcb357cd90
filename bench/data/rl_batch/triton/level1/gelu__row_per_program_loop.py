"""GELU candidate (Triton): one program per row, looping over the row in 512-element chunks, 2 warps; the
normal CDF written as 0.5 * (1 - erf(-x/sqrt2)), equal to the erf form."""

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def gelu_row_kernel(x_ptr, y_ptr, C, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    x_row = x_ptr + row * C
    y_row = y_ptr + row * C
    for start in range(0, C, BLOCK):
        cols = start + tl.arange(0, BLOCK)
        mask = cols < C
        x = tl.load(x_row + cols, mask=mask, other=0.0).to(tl.float32)
        phi = 0.5 * (1.0 - tl.erf(-x * 0.7071067811865476))
        tl.store(y_row + cols, (x * phi).to(y_ptr.dtype.element_ty), mask=mask)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        y = torch.empty_like(x)
        C = x.shape[-1] if x.dim() else 1
        rows = x.numel() // C if C else 0
        if rows:
            gelu_row_kernel[(rows,)](x, y, C, BLOCK=512, num_warps=2)
        return y

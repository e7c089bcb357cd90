"""ReLU candidate (Triton): one program per row of the (batch, dim) view, looping over the row in 2048-element
chunks; the last chunk of a row is masked."""

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def relu_row_kernel(x_ptr, y_ptr, C, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    for start in range(0, C, BLOCK):
        cols = start + tl.arange(0, BLOCK)
        mask = cols < C
        x = tl.load(x_ptr + row * C + cols, mask=mask, other=0.0).to(tl.float32)
        tl.store(y_ptr + row * C + cols, tl.maximum(x, 0.0).to(y_ptr.dtype.element_ty), mask=mask)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        y = torch.empty_like(x)
        C = x.shape[-1] if x.dim() else 1
        rows = x.numel() // C if C else 0
        if rows:
            relu_row_kernel[(rows,)](x, y, C, BLOCK=2048, num_warps=8)
        return y

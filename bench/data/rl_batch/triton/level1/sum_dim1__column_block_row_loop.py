"""Sum-over-dim1 candidate (Triton): one program per (batch, 128-column block); it walks the reduced dimension
one row at a time, each step a coalesced 128-wide load added to a float32 accumulator."""

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def sum_rows_kernel(x_ptr, y_ptr, N, D, BLOCK_D: tl.constexpr):
    b = tl.program_id(0).to(tl.int64)
    cols = tl.program_id(1) * BLOCK_D + tl.arange(0, BLOCK_D)
    mask = cols < D
    base = x_ptr + b * N * D + cols
    acc = tl.zeros([BLOCK_D], dtype=tl.float32)
    for n in range(0, N):
        acc += tl.load(base + n * D, mask=mask, other=0.0).to(tl.float32)
    tl.store(y_ptr + b * D + cols, acc.to(y_ptr.dtype.element_ty), mask=mask)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        B, N, D = x.shape
        y = torch.empty((B, 1, D), dtype=x.dtype, device=x.device)
        if B and D:
            sum_rows_kernel[(B, triton.cdiv(D, 128))](x, y, N, D, BLOCK_D=128, num_warps=4)
        return y

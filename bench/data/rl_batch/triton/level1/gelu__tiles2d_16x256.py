"""GELU candidate (Triton): 2-D tiles of 16 rows x 256 columns over the (batch, dim) view, masked on both axes,
the erf form written as 0.5x + 0.5x erf(x/sqrt2)."""

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def gelu_tile_kernel(x_ptr, y_ptr, R, C, BLOCK_R: tl.constexpr, BLOCK_C: tl.constexpr):
    rows = tl.program_id(0).to(tl.int64) * BLOCK_R + tl.arange(0, BLOCK_R)
    cols = tl.program_id(1) * BLOCK_C + tl.arange(0, BLOCK_C)
    mask = (rows[:, None] < R) & (cols[None, :] < C)
    idx = rows[:, None] * C + cols[None, :]
    x = tl.load(x_ptr + idx, mask=mask, other=0.0).to(tl.float32)
    half_x = 0.5 * x
    y = half_x + half_x * tl.erf(x * 0.7071067811865476)
    tl.store(y_ptr + idx, y.to(y_ptr.dtype.element_ty), mask=mask)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        y = torch.empty_like(x)
        C = x.shape[-1] if x.dim() else 1
        R = x.numel() // C if C else 0
        if R:
            grid = (triton.cdiv(R, 16), triton.cdiv(C, 256))
            gelu_tile_kernel[grid](x, y, R, C, BLOCK_R=16, BLOCK_C=256, num_warps=4)
        return y

"""ReLU candidate (Triton): 2-D tiles of 8 rows x 512 columns over (batch, dim), addressed through the input's
and output's strides (no copy for a non-contiguous input), masked on both axes."""

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def relu_tile_kernel(x_ptr, y_ptr, R, C, sxr, sxc, syr, syc, BLOCK_R: tl.constexpr, BLOCK_C: tl.constexpr):
    rows = tl.program_id(0).to(tl.int64) * BLOCK_R + tl.arange(0, BLOCK_R)
    cols = tl.program_id(1).to(tl.int64) * BLOCK_C + tl.arange(0, BLOCK_C)
    mask = (rows[:, None] < R) & (cols[None, :] < C)
    x = tl.load(x_ptr + rows[:, None] * sxr + cols[None, :] * sxc, mask=mask, other=0.0).to(tl.float32)
    y = tl.where(x > 0, x, 0.0)
    tl.store(y_ptr + rows[:, None] * syr + cols[None, :] * syc, y.to(y_ptr.dtype.element_ty), mask=mask)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x2 = x.reshape(-1, x.shape[-1]) if x.dim() != 1 else x.view(1, -1)
        y = torch.empty(x2.shape, dtype=x.dtype, device=x.device)
        R, C = x2.shape
        if R and C:
            grid = (triton.cdiv(R, 8), triton.cdiv(C, 512))
            relu_tile_kernel[grid](x2, y, R, C, x2.stride(0), x2.stride(1), y.stride(0), y.stride(1),
                                   BLOCK_R=8, BLOCK_C=512, num_warps=4)
        return y.view(x.shape)

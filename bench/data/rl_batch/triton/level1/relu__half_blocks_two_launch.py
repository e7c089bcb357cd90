"""ReLU candidate (Triton): the full 8192-element blocks by an unmasked kernel, the tail (fewer than 8192
elements) by a second, masked launch of the same kernel over the rest."""

import torch
import torch.nn as nn
import triton
import triton.language as tl

BLOCK = 8192


@triton.jit
def relu_block_kernel(x_ptr, y_ptr, start, n, BLOCK: tl.constexpr, MASKED: tl.constexpr):
    offs = start + tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    if MASKED:
        mask = offs < n
        x = tl.load(x_ptr + offs, mask=mask, other=0.0).to(tl.float32)
        tl.store(y_ptr + offs, tl.maximum(x, 0.0).to(y_ptr.dtype.element_ty), mask=mask)
    else:
        x = tl.load(x_ptr + offs).to(tl.float32)
        tl.store(y_ptr + offs, tl.maximum(x, 0.0).to(y_ptr.dtype.element_ty))


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        y = torch.empty_like(x)
        n = x.numel()
        full = n // BLOCK
        if full:
            relu_block_kernel[(full,)](x, y, 0, n, BLOCK=BLOCK, MASKED=False, num_warps=8)
        if n - full * BLOCK:
            relu_block_kernel[(1,)](x, y, full * BLOCK, n, BLOCK=BLOCK, MASKED=True, num_warps=8)
        return y

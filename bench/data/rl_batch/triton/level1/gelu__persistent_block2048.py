"""GELU candidate (Triton): a persistent grid of at most 528 programs striding over 2048-element blocks of the
flat tensor, exact erf GELU in float32, 8 warps."""

import torch
import torch.nn as nn
import triton
import triton.language as tl

PROGRAMS = 528


@triton.jit
def gelu_persistent_kernel(x_ptr, y_ptr, n, n_blocks, BLOCK: tl.constexpr):
    for b in range(tl.program_id(0), n_blocks, tl.num_programs(0)):
        offs = b * BLOCK + tl.arange(0, BLOCK)
        mask = offs < n
        x = tl.load(x_ptr + offs, mask=mask, other=0.0).to(tl.float32)
        cdf = 0.5 * (1.0 + tl.erf(x / 1.4142135623730951))
        tl.store(y_ptr + offs, (x * cdf).to(y_ptr.dtype.element_ty), mask=mask)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        y = torch.empty_like(x)
        n = x.numel()
        if n:
            n_blocks = triton.cdiv(n, 2048)
            gelu_persistent_kernel[(min(PROGRAMS, n_blocks),)](x, y, n, n_blocks, BLOCK=2048, num_warps=8)
        return y

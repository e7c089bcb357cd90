"""ReLU candidate (Triton): a persistent launch of at most 264 programs, each striding over the flat tensor in
1024-element blocks (grid-stride loop), so the grid does not grow with the input."""

import torch
import torch.nn as nn
import triton
import triton.language as tl

PROGRAMS = 264


@triton.jit
def relu_persistent_kernel(x_ptr, y_ptr, n, n_blocks, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    step = tl.num_programs(0)
    for b in range(pid, n_blocks, step):
        offs = b * BLOCK + tl.arange(0, BLOCK)
        mask = offs < n
        x = tl.load(x_ptr + offs, mask=mask, other=0.0).to(tl.float32)
        tl.store(y_ptr + offs, tl.where(x > 0, x, tl.zeros_like(x)), mask=mask)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        y = torch.empty_like(x)
        n = x.numel()
        if n:
            n_blocks = triton.cdiv(n, 1024)
            relu_persistent_kernel[(min(PROGRAMS, n_blocks),)](x, y, n, n_blocks, BLOCK=1024, num_warps=4)
        return y

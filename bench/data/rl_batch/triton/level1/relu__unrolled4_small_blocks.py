"""ReLU candidate (Triton): each program handles four consecutive 256-element blocks (a static unroll for
instruction-level parallelism), 2 warps, the sign test done as a multiply by the mask."""

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def relu_unrolled_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr, UNROLL: tl.constexpr):
    base = tl.program_id(0).to(tl.int64) * (BLOCK * UNROLL)
    for u in tl.static_range(UNROLL):
        offs = base + u * BLOCK + tl.arange(0, BLOCK)
        mask = offs < n
        x = tl.load(x_ptr + offs, mask=mask, other=0.0).to(tl.float32)
        y = x * (x > 0).to(tl.float32)
        tl.store(y_ptr + offs, y.to(y_ptr.dtype.element_ty), mask=mask)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        y = torch.empty_like(x)
        n = x.numel()
        if n:
            relu_unrolled_kernel[(triton.cdiv(n, 256 * 4),)](x, y, n, BLOCK=256, UNROLL=4, num_warps=2)
        return y

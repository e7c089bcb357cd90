"""GELU candidate (Triton): 8192-element blocks, 16 warps, the GELU evaluated in float64 (erf and product) and
rounded to float32, then to the output dtype."""

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def gelu_f64_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask, other=0.0).to(tl.float32).to(tl.float64)
    y = x * 0.5 * (1.0 + tl.erf(x * 0.7071067811865476))
    tl.store(y_ptr + offs, y.to(tl.float32).to(y_ptr.dtype.element_ty), mask=mask)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        y = torch.empty_like(x)
        n = x.numel()
        if n:
            gelu_f64_kernel[(triton.cdiv(n, 8192),)](x, y, n, BLOCK=8192, num_warps=16)
        return y

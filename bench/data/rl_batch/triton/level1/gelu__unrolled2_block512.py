"""GELU candidate (Triton): each program handles two 512-element blocks of the flat tensor (static unroll), the
two loads issued before either result is computed."""

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def _gelu(x):
    return x * 0.5 * (1.0 + tl.erf(x * 0.7071067811865476))


@triton.jit
def gelu_pair_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    base = tl.program_id(0).to(tl.int64) * (2 * BLOCK)
    o0 = base + tl.arange(0, BLOCK)
    o1 = o0 + BLOCK
    m0 = o0 < n
    m1 = o1 < n
    x0 = tl.load(x_ptr + o0, mask=m0, other=0.0).to(tl.float32)
    x1 = tl.load(x_ptr + o1, mask=m1, other=0.0).to(tl.float32)
    tl.store(y_ptr + o0, _gelu(x0).to(y_ptr.dtype.element_ty), mask=m0)
    tl.store(y_ptr + o1, _gelu(x1).to(y_ptr.dtype.element_ty), mask=m1)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        y = torch.empty_like(x)
        n = x.numel()
        if n:
            gelu_pair_kernel[(triton.cdiv(n, 1024),)](x, y, n, BLOCK=512, num_warps=4)
        return y

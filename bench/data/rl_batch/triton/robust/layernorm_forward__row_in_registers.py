"""LayerNorm candidate (Triton): one program per row, the row held in registers as one block of the padded
hidden size, 8 warps; sum and sum of squares of the centred row, tl.rsqrt, affine transform fused into the store."""

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def layernorm_row_kernel(x_ptr, w_ptr, b_ptr, y_ptr, H, eps, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    mask = offs < H
    base = tl.program_id(0).to(tl.int64) * H
    x = tl.load(x_ptr + base + offs, mask=mask, other=0.0).to(tl.float32)
    w = tl.load(w_ptr + offs, mask=mask, other=0.0).to(tl.float32)
    b = tl.load(b_ptr + offs, mask=mask, other=0.0).to(tl.float32)
    mean = tl.sum(x, axis=0) / H
    xc = tl.where(mask, x - mean, 0.0)
    rstd = tl.rsqrt(tl.sum(xc * xc, axis=0) / H + eps)
    tl.store(y_ptr + base + offs, (xc * rstd * w + b).to(y_ptr.dtype.element_ty), mask=mask)


class ModelNew(nn.Module):
    def __init__(self, hidden: int, eps: float = 1e-5):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(1.0 + 0.5 * torch.randn(hidden))
        self.bias = nn.Parameter(0.5 * torch.randn(hidden))

    def forward(self, x):
        x = x.contiguous()
        y = torch.empty_like(x)
        H = x.shape[-1]
        R = x.numel() // H if H else 0
        if R:
            layernorm_row_kernel[(R,)](x, self.weight, self.bias, y, H, self.eps, BLOCK=triton.next_power_of_2(H),
                                       num_warps=8)
        return y

"""RMSNorm candidate (Triton): one program per row with the row in registers (one block of the padded
hidden size), the mean square reduced once, x * rsqrt(ms + eps) * w on the store."""

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def rmsnorm_row_kernel(x_ptr, w_ptr, y_ptr, H, eps, BLOCK: tl.constexpr):
    base = tl.program_id(0).to(tl.int64) * H
    offs = tl.arange(0, BLOCK)
    mask = offs < H
    x = tl.load(x_ptr + base + offs, mask=mask, other=0.0).to(tl.float32)
    w = tl.load(w_ptr + offs, mask=mask, other=0.0).to(tl.float32)
    r = tl.rsqrt(tl.sum(x * x, axis=0) / H + eps)
    tl.store(y_ptr + base + offs, (x * r * w).to(y_ptr.dtype.element_ty), mask=mask)


class ModelNew(nn.Module):
    def __init__(self, hidden: int, eps: float = 1e-6):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(1.0 + 0.5 * torch.randn(hidden))

    def forward(self, x):
        x = x.contiguous()
        y = torch.empty_like(x)
        H = x.shape[-1]
        R = x.numel() // H if H else 0
        if R:
            block = triton.next_power_of_2(H)
            rmsnorm_row_kernel[(R,)](x, self.weight, y, H, self.eps, BLOCK=block, num_warps=min(16, max(1, block // 512)))
        return y

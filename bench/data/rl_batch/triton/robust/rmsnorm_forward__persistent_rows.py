"""RMSNorm candidate (Triton): a persistent grid of at most 264 programs taking rows in a grid-stride loop,
512-element chunks, 2 warps per program."""

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def rmsnorm_persistent_kernel(x_ptr, w_ptr, y_ptr, R, H, eps, BLOCK: tl.constexpr):
    for row in range(tl.program_id(0), R, tl.num_programs(0)):
        x_row = x_ptr + row * H
        acc = tl.zeros([BLOCK], dtype=tl.float32)
        for start in range(0, H, BLOCK):
            cols = start + tl.arange(0, BLOCK)
            x = tl.load(x_row + cols, mask=cols < H, other=0.0).to(tl.float32)
            acc += x * x
        r = tl.rsqrt(tl.sum(acc, axis=0) / H + eps)
        for start in range(0, H, BLOCK):
            cols = start + tl.arange(0, BLOCK)
            mask = cols < H
            x = tl.load(x_row + cols, mask=mask, other=0.0).to(tl.float32)
            w = tl.load(w_ptr + cols, mask=mask, other=0.0).to(tl.float32)
            tl.store(y_ptr + row * H + cols, (x * r * w).to(y_ptr.dtype.element_ty), mask=mask)


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
            rmsnorm_persistent_kernel[(min(R, 264),)](x, self.weight, y, R, H, self.eps, BLOCK=512, num_warps=2)
        return y

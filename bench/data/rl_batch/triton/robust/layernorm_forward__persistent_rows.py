"""LayerNorm candidate (Triton): a persistent grid of at most 528 programs, each taking rows in a grid-stride
loop; per row an exact two-pass mean and variance over 1024-element chunks, then the affine store."""

import torch
import torch.nn as nn
import triton
import triton.language as tl

PROGRAMS = 528


@triton.jit
def layernorm_persistent_kernel(x_ptr, w_ptr, b_ptr, y_ptr, R, H, eps, BLOCK: tl.constexpr):
    for row in range(tl.program_id(0), R, tl.num_programs(0)):
        x_row = x_ptr + row * H
        y_row = y_ptr + row * H
        acc = tl.zeros([BLOCK], dtype=tl.float32)
        for start in range(0, H, BLOCK):
            cols = start + tl.arange(0, BLOCK)
            acc += tl.load(x_row + cols, mask=cols < H, other=0.0).to(tl.float32)
        mean = tl.sum(acc, axis=0) / H
        acc = tl.zeros([BLOCK], dtype=tl.float32)
        for start in range(0, H, BLOCK):
            cols = start + tl.arange(0, BLOCK)
            mask = cols < H
            d = tl.where(mask, tl.load(x_row + cols, mask=mask, other=0.0).to(tl.float32) - mean, 0.0)
            acc += d * d
        rstd = 1.0 / tl.sqrt(tl.sum(acc, axis=0) / H + eps)
        for start in range(0, H, BLOCK):
            cols = start + tl.arange(0, BLOCK)
            mask = cols < H
            x = tl.load(x_row + cols, mask=mask, other=0.0).to(tl.float32)
            w = tl.load(w_ptr + cols, mask=mask, other=0.0).to(tl.float32)
            b = tl.load(b_ptr + cols, mask=mask, other=0.0).to(tl.float32)
            tl.store(y_row + cols, ((x - mean) * rstd * w + b).to(y_ptr.dtype.element_ty), mask=mask)


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
            layernorm_persistent_kernel[(min(R, PROGRAMS),)](x, self.weight, self.bias, y, R, H, self.eps,
                                                             BLOCK=1024, num_warps=4)
        return y

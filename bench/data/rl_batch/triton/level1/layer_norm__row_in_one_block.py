"""LayerNorm candidate (Triton): one program per row with the whole row in one block (BLOCK = next power of two
of the hidden size), mean and then variance of the centred row from registers, affine transform on the store."""

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def layer_norm_block_kernel(x_ptr, w_ptr, b_ptr, y_ptr, H, eps, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    cols = tl.arange(0, BLOCK)
    mask = cols < H
    x = tl.load(x_ptr + row * H + cols, mask=mask, other=0.0).to(tl.float32)
    mean = tl.sum(x, axis=0) / H
    d = tl.where(mask, x - mean, 0.0)
    rstd = 1.0 / tl.sqrt(tl.sum(d * d, axis=0) / H + eps)
    w = tl.load(w_ptr + cols, mask=mask, other=0.0).to(tl.float32)
    b = tl.load(b_ptr + cols, mask=mask, other=0.0).to(tl.float32)
    tl.store(y_ptr + row * H + cols, (d * rstd * w + b).to(y_ptr.dtype.element_ty), mask=mask)


class ModelNew(nn.Module):
    def __init__(self, hidden: int, eps: float = 1e-5):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(1.0 + 0.5 * torch.randn(hidden))
        self.bias = nn.Parameter(0.5 * torch.randn(hidden))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        y = torch.empty_like(x)
        H = x.shape[-1]
        rows = x.numel() // H if H else 0
        if rows:
            block = triton.next_power_of_2(H)
            layer_norm_block_kernel[(rows,)](x, self.weight, self.bias, y, H, self.eps, BLOCK=block,
                                             num_warps=min(16, max(1, block // 256)))
        return y

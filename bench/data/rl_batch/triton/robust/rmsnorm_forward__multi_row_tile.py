"""RMSNorm candidate (Triton): several rows per program as one [ROWS, padded hidden] register tile (ROWS =
8192 / the padded hidden size, at least 1), the mean squares reduced along the rows' axis."""

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def rmsnorm_rows_kernel(x_ptr, w_ptr, y_ptr, R, H, eps, ROWS: tl.constexpr, BLOCK: tl.constexpr):
    rows = tl.program_id(0).to(tl.int64) * ROWS + tl.arange(0, ROWS)
    cols = tl.arange(0, BLOCK)
    cmask = cols < H
    mask = (rows[:, None] < R) & cmask[None, :]
    idx = rows[:, None] * H + cols[None, :]
    x = tl.load(x_ptr + idx, mask=mask, other=0.0).to(tl.float32)
    r = 1.0 / tl.sqrt(tl.sum(x * x, axis=1) / H + eps)
    w = tl.load(w_ptr + cols, mask=cmask, other=0.0).to(tl.float32)
    tl.store(y_ptr + idx, (x * r[:, None] * w[None, :]).to(y_ptr.dtype.element_ty), mask=mask)


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
            rows = max(1, 8192 // block)
            rmsnorm_rows_kernel[(triton.cdiv(R, rows),)](x, self.weight, y, R, H, self.eps, ROWS=rows, BLOCK=block,
                                                         num_warps=8)
        return y

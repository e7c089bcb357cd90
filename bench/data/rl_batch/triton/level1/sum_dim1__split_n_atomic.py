"""Sum-over-dim1 candidate (Triton): the reduced dimension split into 512-row slices, one program per (batch,
column block, slice) summing its [512, 32]-row slice in 2-D tiles and adding the partial sums into a zeroed
float32 buffer with atomic adds; a second kernel casts the buffer to the output."""

import torch
import torch.nn as nn
import triton
import triton.language as tl

SLICE = 512


@triton.jit
def sum_split_kernel(x_ptr, acc_ptr, N, D, SLICE: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_D: tl.constexpr):
    b = tl.program_id(0).to(tl.int64)
    cols = tl.program_id(1) * BLOCK_D + tl.arange(0, BLOCK_D)
    cmask = cols < D
    start = tl.program_id(2) * SLICE
    acc = tl.zeros([BLOCK_N, BLOCK_D], dtype=tl.float32)
    for n0 in range(0, SLICE, BLOCK_N):
        rows = start + n0 + tl.arange(0, BLOCK_N)
        mask = (rows[:, None] < N) & cmask[None, :]
        acc += tl.load(x_ptr + b * N * D + rows[:, None] * D + cols[None, :], mask=mask, other=0.0).to(tl.float32)
    tl.atomic_add(acc_ptr + b * D + cols, tl.sum(acc, axis=0), mask=cmask)


@triton.jit
def cast_kernel(acc_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(y_ptr + offs, tl.load(acc_ptr + offs, mask=mask, other=0.0).to(y_ptr.dtype.element_ty), mask=mask)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        B, N, D = x.shape
        y = torch.empty((B, 1, D), dtype=x.dtype, device=x.device)
        if B and D:
            acc = torch.zeros((B, D), dtype=torch.float32, device=x.device)
            grid = (B, triton.cdiv(D, 32), triton.cdiv(N, SLICE))
            sum_split_kernel[grid](x, acc, N, D, SLICE=SLICE, BLOCK_N=16, BLOCK_D=32, num_warps=2)
            cast_kernel[(triton.cdiv(B * D, 1024),)](acc, y, B * D, BLOCK=1024)
        return y

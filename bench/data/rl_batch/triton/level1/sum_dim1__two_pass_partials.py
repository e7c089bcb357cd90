"""Sum-over-dim1 candidate (Triton): deterministic two-pass reduction. Pass one: one program per (batch, column
block, 256-row chunk) writes the chunk's float32 column sums to a partials buffer [B, chunks, D]; pass two: one
program per (batch, column block) adds the partials in order."""

import torch
import torch.nn as nn
import triton
import triton.language as tl

CHUNK = 256


@triton.jit
def partial_kernel(x_ptr, p_ptr, N, D, CHUNKS, CHUNK: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_D: tl.constexpr):
    b = tl.program_id(0).to(tl.int64)
    cols = tl.program_id(1) * BLOCK_D + tl.arange(0, BLOCK_D)
    c = tl.program_id(2)
    cmask = cols < D
    acc = tl.zeros([BLOCK_D], dtype=tl.float32)
    for n0 in range(0, CHUNK, BLOCK_N):
        rows = c * CHUNK + n0 + tl.arange(0, BLOCK_N)
        mask = (rows[:, None] < N) & cmask[None, :]
        tile = tl.load(x_ptr + b * N * D + rows[:, None] * D + cols[None, :], mask=mask, other=0.0)
        acc += tl.sum(tile.to(tl.float32), axis=0)
    tl.store(p_ptr + (b * CHUNKS + c) * D + cols, acc, mask=cmask)


@triton.jit
def finish_kernel(p_ptr, y_ptr, D, CHUNKS, BLOCK_D: tl.constexpr):
    b = tl.program_id(0).to(tl.int64)
    cols = tl.program_id(1) * BLOCK_D + tl.arange(0, BLOCK_D)
    cmask = cols < D
    acc = tl.zeros([BLOCK_D], dtype=tl.float32)
    for c in range(0, CHUNKS):
        acc += tl.load(p_ptr + (b * CHUNKS + c) * D + cols, mask=cmask, other=0.0)
    tl.store(y_ptr + b * D + cols, acc.to(y_ptr.dtype.element_ty), mask=cmask)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        B, N, D = x.shape
        y = torch.empty((B, 1, D), dtype=x.dtype, device=x.device)
        if B and D:
            chunks = max(1, triton.cdiv(N, CHUNK))
            partials = torch.empty((B, chunks, D), dtype=torch.float32, device=x.device)
            partial_kernel[(B, triton.cdiv(D, 64), chunks)](x, partials, N, D, chunks, CHUNK=CHUNK, BLOCK_N=32,
                                                            BLOCK_D=64, num_warps=4)
            finish_kernel[(B, triton.cdiv(D, 128))](partials, y, D, chunks, BLOCK_D=128, num_warps=4)
        return y

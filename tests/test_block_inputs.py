"""A GPU timed block's inputs as the trusted side draws them (pipeline/gpu_run.BlockInputs), run on the CPU: every
call's inputs a perturbed copy of the configuration's, drawn a chunk of rows at a time so that a block of gigabytes
takes no float32 copy of itself besides."""

from __future__ import annotations

import torch

from kbench_env.measure import inputs as measure_inputs
from kbench_env.pipeline.gpu_run import BlockInputs


def test_a_blocks_rows_are_each_perturbed_alike_in_chunks(monkeypatch):
    x = torch.randn(6, 5).to(torch.float16)
    monkeypatch.setattr(measure_inputs, "FILL_CHUNK_BYTES", 4 * x.numel() * 3)  # three rows a chunk: 17 rows, 6 chunks
    inputs = BlockInputs([x, torch.arange(3)], 0.5, 17, "cpu")
    big, ints = inputs.draw()
    assert big.shape == (17, 6, 5) and big.dtype == torch.float16
    assert torch.equal(ints, torch.arange(3).expand(17, 3))  # an integer input without a draw: copied
    flat = big.float().reshape(17, -1)
    # every row its own noise (no chunk's draw repeated in another), around the input by about noise x its std:
    # over 510 draws the std's own spread is ~0.03 and the mean's ~0.045, so the bounds below are 10 and 7 of
    # those from what an honest draw gives (a false failure well under 1e-10); a repeated or missing chunk, or
    # noise of the wrong scale, fails them
    assert len({tuple(r.tolist()) for r in flat}) == 17
    dev = (flat - x.float().reshape(1, -1)) / (0.5 * x.float().std())
    assert 0.7 < dev.std().item() < 1.3 and abs(dev.mean().item()) < 0.3
    again, _ = inputs.draw()
    assert not torch.equal(again, big)  # a block's draw is its own


def test_without_noise_each_row_is_the_input():
    x = torch.randn(4, 3, dtype=torch.float64)
    (big,) = BlockInputs([x], 0.0, 5, "cpu").draw()
    assert big.dtype == torch.float64 and torch.equal(big, x.expand(5, 4, 3))


def test_a_float64_input_keeps_its_precision_under_small_noise():
    # the input copied, then its noise added in its place: a float64 row differs from the input by the noise alone
    # (at most ~6 sigma of 1e-12 x its std here, a false failure under 1e-8), never by float32's rounding of the
    # input (~6e-8 of its values), which the bound below is far under
    x = torch.randn(8, 16, dtype=torch.float64) * 3
    (big,) = BlockInputs([x], 1e-12, 4, "cpu").draw()
    diff = (big - x).abs()
    assert big.dtype == torch.float64 and diff.max().item() < 1e-10 and diff.max().item() > 0

"""Inclusive prefix sum along each row of a matrix of positive values."""

import torch
import torch.nn as nn


class Model(nn.Module):
    """y[i, j] = sum_{k <= j} x[i, k], with every x[i, k] > 0."""

    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.cumsum(x, dim=1)


batch_size = 256
length = 16384


def get_inputs():
    # Positive data with a large mean and a small spread: every running sum grows steadily to ~1.5 * length, so
    # its late terms add a small value to a large one (a float32 running sum rounds off a growing share of each),
    # and the outputs' large mean dwarfs their spread along a row's tail.
    return [torch.rand(batch_size, length) + 1.0]


def get_init_inputs():
    return []


KBENCH = {
    "level": 1,
    "tags": ["scan", "large-mean"],
    "configs": [
        {"name": "small", "sizes": {"batch_size": 32, "length": 4096}},
        {"name": "odd", "sizes": {"batch_size": 13, "length": 3001}, "held_out": True},
        {"name": "large", "sizes": {"batch_size": 256, "length": 16384}},
        {"name": "gpu", "sizes": {"batch_size": 4096, "length": 16384}, "devices": ["cuda"]},
        {"name": "gpu-long", "sizes": {"batch_size": 37, "length": 1000003}, "devices": ["cuda"], "held_out": True},
    ],
}

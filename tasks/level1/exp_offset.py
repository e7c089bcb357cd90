"""Elementwise exponential of data with a large mean."""

import torch
import torch.nn as nn


class Model(nn.Module):
    """y = exp(x)."""

    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.exp(x)


batch_size = 256
dim = 16384


def get_inputs():
    # Inputs in [3, 4): the outputs lie in [20, 55), large and all positive, with a spread small beside their mean.
    return [torch.rand(batch_size, dim) + 3.0]


def get_init_inputs():
    return []


KBENCH = {
    "level": 1,
    "tags": ["elementwise", "large-mean"],
    "configs": [
        {"name": "small", "sizes": {"batch_size": 16, "dim": 4096}},
        {"name": "odd", "sizes": {"batch_size": 7, "dim": 3001}, "held_out": True},
        {"name": "large", "sizes": {"batch_size": 256, "dim": 16384}},
        {"name": "gpu", "sizes": {"batch_size": 4096, "dim": 16384}, "devices": ["cuda"]},
        {"name": "gpu-bf16", "sizes": {"batch_size": 1024, "dim": 16384}, "dtype": "bfloat16", "devices": ["cuda"], "held_out": True},
    ],
}

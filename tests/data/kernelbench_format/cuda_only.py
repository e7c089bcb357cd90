import torch
import torch.nn as nn


class Model(nn.Module):
    """ReLU whose declared configurations are all for the GPU."""

    def __init__(self):
        super().__init__()

    def forward(self, x):
        return torch.relu(x)


batch_size = 4096
dim = 65536

KBENCH = {
    "configs": [
        {"name": "large", "sizes": {"batch_size": 4096}, "devices": ["cuda"]},
        {"name": "large-odd", "sizes": {"batch_size": 4093}, "devices": ["cuda"], "held_out": True},
    ],
}


def get_inputs():
    return [torch.rand(batch_size, dim)]


def get_init_inputs():
    return []

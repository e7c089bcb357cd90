import torch
import torch.nn as nn


class Model(nn.Module):
    """Elementwise sum: the task of the prompts' one-shot examples."""

    def __init__(self):
        super().__init__()

    def forward(self, a, b):
        return a + b


n = 4096


def get_inputs():
    return [torch.randn(n), torch.randn(n)]


def get_init_inputs():
    return []


KBENCH = {"level": 1, "configs": [{"name": "small", "sizes": {"n": 4096}},
                                  {"name": "odd", "sizes": {"n": 1027}, "held_out": True}]}

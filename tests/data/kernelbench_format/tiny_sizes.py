import torch
import torch.nn as nn


class Model(nn.Module):
    """Row-wise softmax on sizes already small enough for the CPU."""

    def __init__(self):
        super().__init__()

    def forward(self, x):
        return torch.softmax(x, dim=1)


batch_size = 4
dim = 32


def get_inputs():
    return [torch.rand(batch_size, dim)]


def get_init_inputs():
    return []

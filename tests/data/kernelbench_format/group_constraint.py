import torch
import torch.nn as nn


class Model(nn.Module):
    """GroupNorm over a 1-D signal: channels must stay divisible by num_groups (12), which a common
    power-of-two scaling of the large sizes breaks (96 -> 6) and odd channel counts break too."""

    def __init__(self, channels, num_groups):
        super().__init__()
        self.norm = nn.GroupNorm(num_groups, channels)

    def forward(self, x):
        return torch.relu(self.norm(x))


batch_size = 512
channels = 96
num_groups = 12
length = 8192


def get_inputs():
    return [torch.rand(batch_size, channels, length)]


def get_init_inputs():
    return [channels, num_groups]

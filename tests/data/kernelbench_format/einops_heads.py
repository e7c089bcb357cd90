import torch
import torch.nn as nn
from einops import rearrange


class Model(nn.Module):
    """Split the last dimension into heads with einops, normalise each head, merge back."""

    def __init__(self, n_heads):
        super().__init__()
        self.n_heads = n_heads

    def forward(self, x):
        h = rearrange(x, "b s (h d) -> b h s d", h=self.n_heads)
        h = torch.softmax(h, dim=-1)
        return rearrange(h, "b h s d -> b s (h d)")


batch_size = 16
seq_len = 256
n_heads = 8
head_dim = 64


def get_inputs():
    return [torch.rand(batch_size, seq_len, n_heads * head_dim)]


def get_init_inputs():
    return [n_heads]

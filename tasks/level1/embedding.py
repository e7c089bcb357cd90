"""Embedding lookup: map a batch of token ids to rows of a learned table."""

import torch
import torch.nn as nn


class Model(nn.Module):
    """y[b, s] = weight[ids[b, s]] (ids int64, weight num_embeddings x embedding_dim)."""

    def __init__(self, num_embeddings: int, embedding_dim: int):
        super().__init__()
        self.embed = nn.Embedding(num_embeddings, embedding_dim)

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        return self.embed(ids)


batch_size = 32
seq_len = 2048
num_embeddings = 50257
embedding_dim = 1024


def get_inputs():
    return [torch.randint(0, num_embeddings, (batch_size, seq_len))]


def get_init_inputs():
    return [num_embeddings, embedding_dim]


KBENCH = {
    "level": 1,
    "tags": ["indexing"],
    # every timed call draws its own ids: any id the table has (kbench_env/tasks/input_draws.py)
    "input_ranges": {0: {"low": 0, "high": "num_embeddings"}},
    "configs": [
        {"name": "small", "sizes": {"batch_size": 8, "seq_len": 64, "num_embeddings": 1000, "embedding_dim": 128}},
        {"name": "odd", "sizes": {"batch_size": 3, "seq_len": 45, "num_embeddings": 997, "embedding_dim": 77}, "held_out": True},
        {"name": "gpu", "sizes": {"batch_size": 32, "seq_len": 2048, "num_embeddings": 50257, "embedding_dim": 1024}, "devices": ["cuda"]},
        {"name": "gpu-bf16", "sizes": {"batch_size": 16, "seq_len": 4095, "num_embeddings": 128256, "embedding_dim": 2048}, "dtype": "bfloat16", "devices": ["cuda"], "held_out": True},
    ],
}

"""Attack row 8 of issue #21 (the trust boundary), third form, CPU backend, task level1/logsumexp_rows: forward
runs its own kernel on one row (so its own kernel is seen to run), then turns PyTorch's operator records
(RecordFunction) off on its thread and computes the answer with ``torch.logsumexp``, which no profiler then sees.
It leaves them off. No gain in time: what it tests is whether the forward audit notices that it was blinded."""

import torch
import torch.nn as nn

from kbench_env.fastpath import cpp_kernel


# The shipped solution's kernel (the honest computation every attack here starts from) goes here: tests/data/attacks/
# honest_kernel.py, put in by tests/test_trust_boundary.py's attack_source.


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        logsumexp_rows(x[:1])  # a token call: the candidate's own kernel runs
        torch.autograd._enable_record_function(False)
        return torch.logsumexp(x, dim=1)

"""Attack row 8 of issue #21 (the trust boundary), first form, CPU backend, task level1/logsumexp_rows: forward
runs its own kernel on one row (so its own kernel is seen to run) and computes the answer with PyTorch's
``torch.logsumexp`` on a helper thread. No gain in time: what it tests is whether the forward audit, which allows
no PyTorch compute in forward, sees operators run on other threads than forward's."""

import threading

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
        box = []
        helper = threading.Thread(target=lambda: box.append(torch.logsumexp(x, dim=1)))
        helper.start()
        helper.join()
        return box[0]

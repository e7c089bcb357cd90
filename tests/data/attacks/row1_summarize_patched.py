"""Attack row 1 of issue #21 (the trust boundary), CPU backend, task level1/logsumexp_rows: the worker's timing
summary is replaced so that every time it reports is divided by 4 (``FACTOR``: the claimed speedup stays under the
trusted side's re-timing threshold, 10x).

The kernel is the shipped solution's (tasks/solutions/cpu/level1/logsumexp_rows.py): the output is right on
every call. At import, every ``summarize`` function of the kbench modules loaded in this process (the worker's
timing module, wherever it lives) is wrapped to summarise the times divided by ``FACTOR``. Where the worker no
longer summarises its own times, nothing is patched and the candidate is the honest kernel."""

import sys
import types

import torch
import torch.nn as nn

from kbench_env.fastpath import cpp_kernel

FACTOR = 4.0


def _divided(summarize):
    def summarize_faster(times, *args, **kwargs):
        return summarize([t / FACTOR for t in times], *args, **kwargs)

    return summarize_faster


for _name, _mod in list(sys.modules.items()):
    if _name.startswith("kbench_env") and isinstance(getattr(_mod, "summarize", None), types.FunctionType):
        _mod.summarize = _divided(_mod.summarize)


# The shipped solution's kernel (the honest computation every attack here starts from) goes here: tests/data/attacks/
# honest_kernel.py, put in by tests/test_trust_boundary.py's attack_source.


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return logsumexp_rows(x)

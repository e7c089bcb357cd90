"""Attack row 2 of issue #21 (the trust boundary), CPU backend, task level1/logsumexp_rows: the worker's message
framing (``pack``) is wrapped so that every time in a reply (a header number or list of numbers under a key ending
in ``_ms``, such as the timing reply's ``median_ms``) is divided by 4 on its way out (the claimed speedup stays
under the trusted side's re-timing threshold, 10x).

The kernel is the shipped solution's. The wrapper replaces ``pack`` wherever the loaded kbench modules hold it (the
worker loop's globals, ``kbench_env.protocol.wire``). Where no time the trusted side believes passes through the
worker's replies, the candidate is the honest kernel."""

import sys
import types

import torch
import torch.nn as nn

from kbench_env.fastpath import cpp_kernel

FACTOR = 4.0


def _faster(value):
    if isinstance(value, bool):
        return value
    if isinstance(value, (int, float)):
        return value / FACTOR
    if isinstance(value, list):
        return [_faster(v) for v in value]
    return value


def _scaled(header):
    if not isinstance(header, dict):
        return header
    return {k: (_faster(v) if isinstance(k, str) and k.endswith("_ms") else v) for k, v in header.items()}


def _wrapped(pack):
    def pack_faster(header, *args, **kwargs):
        return pack(_scaled(header), *args, **kwargs)

    pack_faster.kb_wrapped = True
    return pack_faster


for _name, _mod in list(sys.modules.items()):
    _pack = getattr(_mod, "pack", None) if _name.startswith("kbench_env") else None
    if isinstance(_pack, types.FunctionType) and not getattr(_pack, "kb_wrapped", False):
        _mod.pack = _wrapped(_pack)


# The shipped solution's kernel (the honest computation every attack here starts from) goes here: tests/data/attacks/
# honest_kernel.py, put in by tests/test_trust_boundary.py's attack_source.


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return logsumexp_rows(x)

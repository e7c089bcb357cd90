"""Timed outputs checked after the timing rather than between its blocks, so that the device's exclusive hold
(device_hold.py) holds only the timing.

After each timed block the trusted side reads the outputs of a few calls chosen then (gpu_blocks.py); the read has
to happen before the next block overwrites them, but their comparison with the reference's outputs for the same
inputs (the reference run on the device, then the comparison) need not: the outputs read and the inputs of those
calls are kept (copies on the device), and judged once the timing has released its exclusive hold, under a shared
one beside other candidates' checks. Nothing is checked less: the same calls, chosen the same way after their
block ran, read at the same moment, compared with the same reference; what changes is when the comparison runs,
and that a wrong output does not cut the timing short (a wrong candidate's timing runs to its end, then fails).

What is kept is bounded (``budget`` bytes per configuration's timing); past it the checks are judged at once, as
before.
"""

from __future__ import annotations

import torch

#: Bytes of kept outputs and inputs per configuration's timing, past which checks are judged at once.
BUDGET_BYTES = 256 << 20


def _nbytes(leaves) -> int:
    return sum(x.numel() * x.element_size() for x in leaves if isinstance(x, torch.Tensor))


def _copy(leaves) -> list:
    return [x.clone() if isinstance(x, torch.Tensor) else x for x in leaves]


class DeferredChecks:
    """``check(out, inputs)`` (why the output is wrong for its inputs, or None) run now or kept for ``judge``."""

    def __init__(self, check, defer: bool, budget: int = BUDGET_BYTES):
        self.check, self.defer, self.budget = check, defer, budget
        self.kept: list = []  # (call number, output leaves, input leaves)
        self.kept_bytes = 0

    def __len__(self) -> int:
        return len(self.kept)

    def add(self, call: int, out: list, inputs: list) -> tuple[int, str] | None:
        """Check call ``call``'s output now, or keep copies of its inputs (views into a block's staged inputs,
        which the next block replaces) to check later. ``(call, why)`` when checked now and wrong."""
        size = _nbytes(out) + _nbytes(inputs)
        if self.defer and self.kept_bytes + size <= self.budget:
            self.kept.append((call, out, _copy(inputs)))
            self.kept_bytes += size
            return None
        why = self.check(out, inputs)
        return None if why is None else (call, why)

    def merge(self, other: DeferredChecks) -> None:
        """Keep ``other``'s checks too (a timing done again: every timed call that was read is judged)."""
        self.kept += other.kept
        self.kept_bytes += other.kept_bytes
        other.kept, other.kept_bytes = [], 0

    def judge(self) -> tuple[int, str] | None:
        """Judge the kept checks in call order; the first wrong ``(call, why)``, else None. Frees what was kept."""
        try:
            for call, out, inputs in sorted(self.kept, key=lambda k: k[0]):
                why = self.check(out, inputs)
                if why is not None:
                    return call, why
            return None
        finally:
            self.kept, self.kept_bytes = [], 0

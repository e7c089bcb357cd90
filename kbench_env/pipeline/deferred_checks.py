"""Timed outputs checked after the timing rather than between its blocks, so that the device's exclusive hold
(device_hold.py) holds only the timing.

After each timed block the trusted side reads the outputs of a few calls chosen then (gpu_blocks.py); the read has
to happen before the next block overwrites them, but their comparison with the reference's outputs for the same
inputs (the reference run on the device, then the comparison) need not: the outputs read and the inputs of those
calls are kept (copies on the device), and judged once the timing has released its exclusive hold, under a shared
one beside other candidates' checks. Nothing is checked less: the same calls, chosen the same way after their
block ran, read at the same moment, compared with the same reference; what changes is when the comparison runs,
and that a wrong output does not cut the timing short (a wrong candidate's timing runs to its end, then fails).

What is kept is bounded by the device, not by the configuration: every timing of this process on a device draws
its kept bytes from one pool of DEFER_SHARE of the device's memory (``Pool``), and a check that does not fit in
what is left is judged at once. A fixed bound per configuration would judge every check of a
configuration with outputs of half a gigabyte inside the exclusive hold, however much of the device is free.
"""

from __future__ import annotations

import threading
import weakref

import torch

#: The share of a device's memory that the kept checks of all of this process's timings on it may take together.
DEFER_SHARE = 0.08
#: The pool where the device's size is not known (the CPU: nothing is deferred there; tests).
BUDGET_BYTES = 256 << 20


class Pool:
    """Bytes that kept checks may take on one device, shared by every timing of this process on it."""

    _by_device: dict = {}
    _made = threading.Lock()

    def __init__(self, capacity: int):
        self.capacity, self.used = int(capacity), 0
        self._lock = threading.Lock()

    @classmethod
    def of(cls, device) -> Pool:
        """The pool of ``device`` (made on first use, DEFER_SHARE of its memory as it is then; BUDGET_BYTES off a
        GPU)."""
        d = torch.device(device)
        key = str(d) if d.type != "cuda" or d.index is not None else f"cuda:{torch.cuda.current_device()}"
        with cls._made:
            if key not in cls._by_device:
                size = BUDGET_BYTES
                if d.type == "cuda":
                    size = max(size, int(DEFER_SHARE * torch.cuda.get_device_properties(torch.device(key)).total_memory))
                cls._by_device[key] = cls(size)
            return cls._by_device[key]

    def take(self, n: int) -> bool:
        with self._lock:
            if self.used + n > self.capacity:
                return False
            self.used += n
            return True

    def give(self, n: int) -> None:
        with self._lock:
            self.used -= n


def _nbytes(leaves) -> int:
    return sum(x.numel() * x.element_size() for x in leaves if isinstance(x, torch.Tensor))


def _copy(leaves) -> list:
    return [x.clone() if isinstance(x, torch.Tensor) else x for x in leaves]


class DeferredChecks:
    """``check(out, inputs)`` (why the output is wrong for its inputs, or None) run now or kept for ``judge``."""

    def __init__(self, check, defer: bool, pool: Pool | None = None):
        self.check, self.defer = check, defer
        self.pool = pool if pool is not None else Pool(BUDGET_BYTES)
        self.kept: list = []  # (call number, output leaves, input leaves)
        # the bytes kept, taken from the pool: given back when judged, or when this is dropped unjudged (a timing
        # that failed); a list, so that the finalizer holds it and not this
        self._held = [0]
        weakref.finalize(self, _give_back, self.pool, self._held)

    def __len__(self) -> int:
        return len(self.kept)

    def add(self, call: int, out: list, inputs: list) -> tuple[int, str] | None:
        """Check call ``call``'s output now, or keep copies of its inputs (views into a block's staged inputs,
        which the next block replaces) to check later. ``(call, why)`` when checked now and wrong."""
        size = _nbytes(out) + _nbytes(inputs)
        if self.defer and self.pool.take(size):
            self._held[0] += size
            self.kept.append((call, out, _copy(inputs)))
            return None
        why = self.check(out, inputs)
        return None if why is None else (call, why)

    def merge(self, other: DeferredChecks) -> None:
        """Keep ``other``'s checks too (a timing done again: every timed call that was read is judged)."""
        self.kept += other.kept
        if other.pool is self.pool:
            self._held[0] += other._held[0]
            other._held[0] = 0
        other.kept = []

    def judge(self) -> tuple[int, str] | None:
        """Judge the kept checks in call order; the first wrong ``(call, why)``, else None. Frees what was kept."""
        try:
            for call, out, inputs in sorted(self.kept, key=lambda k: k[0]):
                why = self.check(out, inputs)
                if why is not None:
                    return call, why
            return None
        finally:
            self.kept = []
            _give_back(self.pool, self._held)


def _give_back(pool: Pool, held: list) -> None:
    n, held[0] = held[0], 0
    if n:
        pool.give(n)

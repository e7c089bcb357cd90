"""The inputs of timed calls, made on the trusted side from randomness the worker never sees.

Every timed call gets its own inputs: the configuration's checked inputs plus dense noise of ``noise`` times each
floating tensor's standard deviation, and its integer and boolean inputs (ids, indices, labels, masks) drawn afresh
within the range the task gives them (tasks/input_draws.py), so neither a cache keyed on pointers nor one keyed on
contents can return a stored result. An input that cannot vary is kept as made; a configuration none of whose
inputs varies has its outputs poisoned between blocks instead (``varies``; blocks.py). Each call's inputs follow
from a 64-bit key drawn here with ``secrets`` when its block is prepared; the worker sees a call's inputs only
once the block that uses them has started (pipeline/blocks.py), and nothing it has seen lets it derive the next
key. The trusted side remakes a checked call's inputs from its key.

Fresh normal noise per call costs more than a small kernel on the CPU; a large tensor (over ``BANK_ABOVE``
elements) takes its noise from a bank of ``BANK`` secret noise vectors instead, the key choosing a vector and a
rotation of it: one of ``BANK * numel`` noise patterns, unknown until the block starts. Each vector is kept twice
over end to end, so that a rotation is a slice of it (no copy), and the vector and the rotation are read off the
key itself (no generator): paired CPU timing makes thousands of calls' inputs an evaluation, and the time spent
making them is time not spent timing pairs.
"""

from __future__ import annotations

import secrets

import torch

from kbench_env.measure.inputs import input_stds
from kbench_env.tasks.input_draws import varies

#: Tensors with more elements than this take their noise from the bank (rotations of secret noise vectors).
BANK_ABOVE = 1 << 14
BANK = 4


class RevealedInputs:
    """Per-call inputs for one configuration's timed calls: ``draw()`` a call's key, ``make(key)`` its inputs
    (on the originals' device), the same for the same key. ``draws`` (input_draws.input_draws: per input, its
    IntegerDraw or None) makes the integer inputs fresh; without it they are kept as made."""

    def __init__(self, originals: list, noise: float, draws: list | None = None):
        self.originals = [x.detach() if isinstance(x, torch.Tensor) else x for x in originals]
        self.noise = noise
        self.stds = input_stds(self.originals)
        self.draws = list(draws or [None] * len(self.originals))
        self.varies = varies(self.originals, self.draws)
        self._bank: dict = {}
        for i, x in enumerate(self.originals):
            if self.stds[i] is not None and x.numel() > BANK_ABOVE:
                g = torch.Generator(device=x.device)
                g.manual_seed(secrets.randbits(63))
                bank = torch.randn(BANK, x.numel(), generator=g, device=x.device)
                self._bank[i] = torch.cat([bank, bank], dim=1)  # rotations as slices (``make``)

    @staticmethod
    def draw() -> int:
        return secrets.randbits(63)

    def make(self, key: int) -> list:
        g = None  # made only where an input needs one
        out = []
        for i, x in enumerate(self.originals):
            std, d = self.stds[i], self.draws[i] if i < len(self.draws) else None
            if std is None and d is not None and d.varies and isinstance(x, torch.Tensor) and x.numel():
                g = g or torch.Generator().manual_seed(key)
                out.append(d.draw(x.shape, g, x.dtype, "cpu").to(x.device))
                continue
            if std is None:
                out.append(x.clone() if isinstance(x, torch.Tensor) else x)
                continue
            if i in self._bank:
                n = x.numel()
                row, shift = _rotation(key, i, n)
                noise = self._bank[i][row, n - shift:2 * n - shift].view(x.shape)  # the row rolled by ``shift``
            else:
                g = g or torch.Generator().manual_seed(key)
                noise = torch.randn(x.shape, generator=g).to(x.device)
            wide = x if x.dtype == torch.float64 else x.float()  # half precision perturbed in float32, as rounded last
            out.append(torch.add(wide, noise.to(wide.dtype), alpha=self.noise * std).to(x.dtype))
        return out


def _rotation(key: int, i: int, n: int) -> tuple[int, int]:
    """Input ``i``'s bank vector and rotation for call ``key`` (a secret 63-bit draw): its bits, mixed with the
    input's position so that two inputs of one call do not share a rotation."""
    mixed = (key * 0x9E3779B97F4A7C15 + i * 0xBF58476D1CE4E5B9) % (1 << 64)
    mixed ^= mixed >> 31
    return mixed % BANK, (mixed // BANK) % n

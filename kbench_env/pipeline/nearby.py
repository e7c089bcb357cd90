"""A close miss judged again at nearby inputs: an output that matches the reference's answer to a problem within
rounding distance of the call's own is correct (backward stability, the numerical analyst's test of a result).

Why: where the reference is discontinuous, rounding decides the answer. ReLU's derivative flips where the
pre-activation lies within rounding of zero, and an honest float32 kernel that sums in another order than PyTorch
(a plain loop, a fused multiply-add loop) lands on the other side of PyTorch's answer, and of the float64
reference's, in about one call in 2,000 to 4,000 (``robust/linear_relu_backward``'s float32 shapes;
bench/relu_flip_rate.py measures it, bench/RESULTS.md has the figure), moving a whole row of a gradient by ~1 % of
the output's norm: far over a float32 tolerance, and bound to happen somewhere when timed calls are checked by the
hundred.

The test: draw ``DRAWS`` nudges of the call's floating inputs, each element scaled by ``1 + SCALE * u`` with ``u``
uniform in [-1, 1] (``SCALE`` is 64 float32 rounding units), and accept the output if it matches the reference at
any of them. A nudge moves a pre-activation by a few times what rounding does, so it puts a flipped one on the
kernel's side with probability about a third or more, and an honest flip is missed with probability under
(2/3)^DRAWS (~0.2 %); the seeded test in tests/test_nearby.py shows the rate over many draws. A wrong output is not rescued: a stale,
cached or imprecise one differs from the reference at every input this close (the nudges move the reference's
answer by ~SCALE, far under the gap); the same test shows that too. Only a close miss (norm-wise error at most
``MAX_NORM``) is tried again, so a grossly wrong candidate costs no extra reference runs; the nudges are drawn
here, from a source the candidate cannot see. Half-precision inputs are nudged below their own rounding (no
change): their tolerances are wide already.
"""

from __future__ import annotations

import secrets

import torch

from kbench_env.measure.compare import compare_outputs

#: Nudges tried before a close miss stands.
DRAWS = 16
#: An element's relative nudge: 64 float32 rounding units.
SCALE = 2.0 ** -17
#: The largest norm-wise error tried again: a rounding-decided flip moves a few per cent at most.
MAX_NORM = 0.1


def nudged(inputs: list, gen: torch.Generator, scale: float = SCALE) -> list:
    """``inputs`` with each floating tensor's elements scaled by ``1 + scale * u``, ``u`` uniform in [-1, 1]."""
    out = []
    for x in inputs:
        if isinstance(x, torch.Tensor) and x.is_floating_point():
            u = torch.rand(x.shape, generator=gen, dtype=torch.float64).mul_(2).sub_(1)
            x = (x.double() * (1 + scale * u).to(x.device)).to(x.dtype)
        out.append(x)
    return out


def close_miss(figures: dict) -> bool:
    """A mismatch worth trying again: a numeric one (not a shape, a dtype or a NaN) of at most ``MAX_NORM``."""
    norm = figures.get("norm_err")
    return norm is not None and norm == norm and norm <= MAX_NORM


def matches_nearby(out, call_inputs: list, reference, dtype: torch.dtype, tolerance: dict | None,
                   draws: int = DRAWS, seed: int | None = None) -> bool:
    """Whether ``out`` matches ``reference(inputs)`` (the trusted reference as a function of the inputs) at one of
    ``draws`` nudges of ``call_inputs``. ``seed`` fixes the nudges (tests); by default they are drawn afresh."""
    gen = torch.Generator().manual_seed(secrets.randbits(63) if seed is None else seed)
    for _ in range(draws):
        mismatch, _ = compare_outputs(out, reference(nudged(call_inputs, gen)), dtype, tolerance)
        if mismatch is None:
            return True
    return False


def check_call(out, call_inputs: list, reference, dtype: torch.dtype, tolerance: dict | None,
               draws: int = DRAWS) -> str | None:
    """Why ``out`` is wrong for ``call_inputs``, or None: the reference's answer, then, for a close miss, its
    answers at ``draws`` nearby inputs (module docstring)."""
    mismatch, figures = compare_outputs(out, reference(call_inputs), dtype, tolerance)
    if mismatch is None or (close_miss(figures)
                            and matches_nearby(out, call_inputs, reference, dtype, tolerance, draws)):
        return None
    return mismatch.message

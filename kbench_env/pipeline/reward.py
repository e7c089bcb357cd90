"""Rewards: functions from an EvalResult to a float, with named presets.

The default preset ("tiered") orders outcomes as the environment promises:

    exploit detected (-1.0) < invalid / rejected by the screen (-0.6) < does not build or load (-0.4)
    < runs but wrong, crashes or times out (-0.2) < correct but slower (0.05 .. 1.0) < faster (1.0 .. 2.0)

A correct candidate earns ``1 + clip(log(speedup) / log(cap), -0.95, 1)``: 1.0 at parity, 2.0 at ``cap``x
(default 10x) and above, 0.05 at 1/cap or slower: monotone in the speedup and capped, so one implausible number
cannot dominate a batch. Other presets: "binary" (1 if correct), "speedup" (the capped speedup if correct, else 0;
-1 for an exploit), "kevin" (Kevin-32B style: 0.3 for correctness plus the capped speedup). Any callable
``f(result) -> float`` works too. Under every preset an exploit (a result with integrity flags) is paid the lowest
reward of its flags' kinds (the registry's, protocol/integrity_flags.py).

Under ``rules="kernelbench"`` PyTorch may do the work beside a token kernel of the candidate's own (rules.py), so
every preset pays the speedup credited by kernel coverage (``credited_speedup``): a candidate whose own kernels
take less than ``MIN_COVERAGE`` (half) of forward's time is credited with a speedup of at most its coverage. A
token kernel at parity with PyTorch (coverage 0.18) is then paid as a 0.18x kernel (tiered 0.26), below any
honest kernel at least that fast, never in the "faster" tier. Under "strict" rules forward runs only the
candidate's kernels, and the speedup is paid as measured. Where coverage was not measured (None) it is paid as
measured too.

Every preset pays "faster" only for a speedup its measurement shows: where the result carries the speedup's
confidence interval (``speedup_ci``, the CPU's paired timing: pipeline/pair_stats.py, 95 %), a speedup above 1 whose
interval's lower end is not above 1 is paid as parity (1.0), so noise alone is not paid as speed; a slower one is
paid as measured. Without an interval (a GPU's timing, or the torch.compile baseline) the measured speedup is paid.

An episode of several attempts gets one scalar from its per-attempt rewards (``episode_reward``: the best or the
last, less a small cost per extra turn), the rule the GRPO rollout and the framework adapters share.
"""

from __future__ import annotations

import math
from typing import Callable

from kbench_env.pipeline.result import EvalResult
from kbench_env.protocol import integrity_flags

EXPLOIT, INVALID, NO_BUILD, WRONG = integrity_flags.EXPLOIT_REWARD, -0.6, -0.4, -0.2


def _flagged(r: EvalResult) -> float | None:
    """The reward of a flagged result under every preset (the registry's, protocol/integrity_flags.py); None
    when it has no integrity flag."""
    return integrity_flags.reward(r.integrity_flags)


def _failure(r: EvalResult) -> float | None:
    if r.integrity_flags:
        return _flagged(r)
    if r.stage == "none":
        return INVALID
    if not r.compiled:
        return NO_BUILD
    if not r.correct:
        return WRONG
    return None


#: Under rules="kernelbench", the kernel coverage below which the speedup is credited at most the coverage.
MIN_COVERAGE = 0.5


def measured_speedup(r: EvalResult) -> float | None:
    """The speedup against the baseline the evaluation names ("eager" or "compile"), as the presets credit it
    (``credited_speedup``)."""
    s = r.speedup_compile if r.baseline == "compile" and r.speedup_compile is not None else r.speedup
    return credited_speedup(r, s)


def credited_speedup(r: EvalResult, s: float | None) -> float | None:
    """``s``, or under rules="kernelbench" with a kernel coverage below ``MIN_COVERAGE``, at most that coverage
    (see the module docstring)."""
    c = r.kernel_coverage
    if s is None or r.rules != "kernelbench" or not isinstance(c, (int, float)) or c >= MIN_COVERAGE:
        return s
    return min(s, max(float(c), 0.0))


def paid_speedup(r: EvalResult) -> float | None:
    """The speedup the presets pay: the measured one, but parity (1.0) for one above 1 whose confidence interval
    reaches down to 1 or below (module docstring)."""
    s = measured_speedup(r)
    eager = not (r.baseline == "compile" and r.speedup_compile is not None)
    ci = r.speedup_ci if eager else None  # the interval is the eager speedup's
    if s is not None and ci and s > 1.0 and not ci[0] > 1.0:
        return 1.0
    return s


def tiered(r: EvalResult, cap: float = 10.0) -> float:
    bad = _failure(r)
    if bad is not None:
        return bad
    s = paid_speedup(r)
    s = credited_speedup(r, 1.0) if s is None else s  # untimed: parity, credited as a timed one would be
    return 1.0 + max(-0.95, min(1.0, math.log(max(s, 1e-9)) / math.log(cap)))


def binary(r: EvalResult) -> float:
    if r.integrity_flags:
        return _flagged(r)
    return 1.0 if r.correct else 0.0


def speedup(r: EvalResult, cap: float = 10.0) -> float:
    if r.integrity_flags:
        return _flagged(r)
    if not r.correct:
        return 0.0
    return min(cap, paid_speedup(r) or 0.0)


def kevin(r: EvalResult, cap: float = 10.0) -> float:
    if r.integrity_flags:
        return _flagged(r)
    if not r.correct:
        return 0.0
    return 0.3 + min(cap, paid_speedup(r) or 0.0)


PRESETS: dict[str, Callable[[EvalResult], float]] = {"tiered": tiered, "default": tiered, "binary": binary,
                                                     "speedup": speedup, "kevin": kevin}


def get_reward_fn(reward) -> Callable[[EvalResult], float]:
    if reward is None:
        return tiered
    if callable(reward):
        return reward
    try:
        return PRESETS[reward]
    except KeyError:
        raise ValueError(f"unknown reward preset {reward!r}; presets: {sorted(PRESETS)}, or pass a callable") from None


EPISODE_REWARDS = ("best", "last")


def episode_reward(turn_rewards: list[float], mode: str = "best", turn_cost: float = 0.02) -> float:
    """One scalar for an episode from the env's per-turn rewards ``r_1..r_T``: ``max_t r_t`` ("best": the best
    kernel the episode produced, what a user of the agent keeps) or ``r_T`` ("last"), less ``turn_cost * (T - 1)``
    so that solving in fewer turns is worth more."""
    if not turn_rewards:
        raise ValueError("an episode has at least one turn")
    if mode == "best":
        base = max(turn_rewards)
    elif mode == "last":
        base = turn_rewards[-1]
    else:
        raise ValueError(f"episode reward must be one of {EPISODE_REWARDS}, got {mode!r}")
    return float(base - turn_cost * (len(turn_rewards) - 1))

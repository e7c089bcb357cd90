"""The statistics of paired timing (pipeline/paired.py): a speedup and its confidence interval from alternating
reference and candidate blocks.

The blocks run R C R C ... C R. Pair i is candidate block C_i and the two reference blocks around it; its log ratio
is ``(log R_i + log R_{i+1}) / 2 - log C_i``: a load that changes steadily over the three blocks lands on both sides
and cancels. The speedup is ``exp`` of the median of the pairs' log ratios; its interval is the distribution-free
order-statistic interval for that median (the sign test's): with n pairs, ``[x_(k), x_(n+1-k)]`` of the sorted log
ratios, k the largest with ``P(Binomial(n, 1/2) < k) <= (1 - confidence) / 2``. It assumes only that the pairs are
independent draws with one median, whatever their distribution (skewed, heavy-tailed: a load spike is one pair's
problem); it needs at least ``min_pairs(confidence)`` pairs (6 at 0.95; 8 at 0.9875, four configurations).

An evaluation's speedup is the geometric mean over its configurations; its interval is the geometric mean of the
configurations' ends, each configuration's interval taken at confidence ``1 - (1 - confidence) / m`` for m
configurations (Bonferroni): when every configuration's interval holds, so does the mean's, so the evaluation's
interval holds with probability at least ``confidence``. What the reward does with it: pipeline/reward.py.
"""

from __future__ import annotations

import math
from functools import lru_cache

#: The evaluation's interval's confidence (two-sided): its lower end is above the true speedup at most half of
#: (1 - CONFIDENCE) of the time (2.5 %), whatever the configurations' count.
CONFIDENCE = 0.95


def config_confidence(configs: int, confidence: float = CONFIDENCE) -> float:
    """The confidence each of ``configs`` configurations' intervals is taken at (Bonferroni)."""
    return 1.0 - (1.0 - confidence) / max(1, configs)


@lru_cache(maxsize=256)
def _rank(n: int, confidence: float) -> int:
    """The largest k >= 1 with P(Binomial(n, 1/2) <= k - 1) <= (1 - confidence) / 2, or 0 if even k = 1 fails."""
    tail, k, cdf = (1.0 - confidence) / 2.0, 0, 0.0
    for j in range(n // 2 + 1):
        cdf += math.comb(n, j) / 2.0 ** n  # P(X <= j)
        if cdf > tail:
            break
        k = j + 1
    return k


def min_pairs(confidence: float) -> int:
    """The fewest pairs whose sign-test interval reaches ``confidence`` (``[min, max]``: 1 - 2^(1-n))."""
    n = 1
    while _rank(n, confidence) < 1:
        n += 1
    return n


def log_ratios(reference_s: list[float], candidate_s: list[float]) -> list[float]:
    """Per pair, the log of reference over candidate time: ``reference_s`` (per-call times) has one more block
    than ``candidate_s``, the candidate's blocks sitting between the reference's."""
    if len(reference_s) != len(candidate_s) + 1:
        raise ValueError(f"{len(reference_s)} reference blocks around {len(candidate_s)} candidate blocks: "
                         "the reference's must enclose the candidate's (one more)")
    return [(math.log(reference_s[i]) + math.log(reference_s[i + 1])) / 2.0 - math.log(c)
            for i, c in enumerate(candidate_s)]


def median(xs: list[float]) -> float:
    s, n = sorted(xs), len(xs)
    return s[n // 2] if n % 2 else (s[n // 2 - 1] + s[n // 2]) / 2.0


def interval(logs: list[float], confidence: float) -> tuple[float, float] | None:
    """The sign-test interval (in ratio, not log) for the median of ``logs`` at ``confidence``; None with too few
    pairs for it."""
    k = _rank(len(logs), confidence)
    if k < 1:
        return None
    s = sorted(logs)
    return math.exp(s[k - 1]), math.exp(s[len(s) - k])


def speedup(logs: list[float], confidence: float) -> tuple[float, tuple[float, float] | None]:
    """(the speedup: exp of the median log ratio, its interval at ``confidence`` or None)."""
    return math.exp(median(logs)), interval(logs, confidence)


def relative_width(ci: tuple[float, float] | None) -> float:
    """How wide an interval is: its upper over its lower end, minus one (inf without one)."""
    if ci is None:
        return math.inf
    return ci[1] / max(ci[0], 1e-300) - 1.0


def combined(cis: list) -> list[float] | None:
    """The evaluation's interval from its configurations' (each at ``config_confidence``): the geometric means of
    their lower and of their upper ends; None when a configuration has none."""
    if not cis or any(c is None for c in cis):
        return None
    lo = math.exp(sum(math.log(c[0]) for c in cis) / len(cis))
    hi = math.exp(sum(math.log(c[1]) for c in cis) / len(cis))
    return [lo, hi]

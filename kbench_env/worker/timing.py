"""Timing figures: a list of per-call times summarised as median and spread (``Timing``), the stopping rule's
precision test, and ``time_calls``, the simple per-call timer a backend calibrates its device with.

A candidate's timed blocks are timed by the trusted side (pipeline/blocks.py, pipeline/gpu_blocks.py), which
summarises its own times here. The clock is captured when this module is imported, before any candidate code is
loaded in a worker (a GPU worker's eagerly run blocks read it: worker/gpu_executor.py).
"""

from __future__ import annotations

import statistics
import time
from dataclasses import dataclass

_perf_counter = time.perf_counter  # captured before candidate code exists in this process


@dataclass
class Timing:
    median_ms: float
    iqr_ms: float
    reps: int
    times_ms: list

    def to_dict(self) -> dict:
        return {"median_ms": self.median_ms, "iqr_ms": self.iqr_ms, "reps": self.reps}


def summarize(times_ms: list) -> Timing:
    s = sorted(times_ms)
    q = statistics.quantiles(s, n=4) if len(s) >= 4 else [s[0], statistics.median(s), s[-1]]
    return Timing(median_ms=statistics.median(s), iqr_ms=q[2] - q[0], reps=len(s), times_ms=s)


def median_is_precise(times_ms: list, rel: float) -> bool:
    """Whether the median of ``times_ms`` is known to within ``rel`` of itself: the 95% confidence interval of a
    median, +-1.58 IQR / sqrt(n) (McGill, Tukey and Larsen's notches), is narrower than that. At least 5 times."""
    if len(times_ms) < 5:
        return False
    s = summarize(times_ms)
    return 1.58 * s.iqr_ms / len(times_ms) ** 0.5 <= rel * s.median_ms


def time_calls(fn, make_inputs, *, warmup: int = 3, min_reps: int = 10, max_reps: int = 200,
               min_seconds: float = 0.3, max_seconds: float = 10.0, sync=None) -> Timing:
    """Time ``fn(*make_inputs(j))`` for calls j = 0, 1, ...; one clock reading pair per call.

    ``make_inputs(j)`` builds call j's inputs outside the timed region (each call gets fresh tensors). Runs
    ``warmup`` untimed calls (j < 0), then at least ``min_reps`` and at most ``max_reps`` timed calls, stopping
    once ``min_seconds`` of timed work has accumulated (or ``max_seconds`` of wall time has passed). ``sync``
    (a device-wide synchronise) runs before each clock reading.
    """
    sync = sync or (lambda: None)
    for i in range(warmup):
        fn(*make_inputs(-1 - i))
    sync()
    times = []
    start = _perf_counter()
    total = 0.0
    j = 0
    while j < max_reps and (j < min_reps or total < min_seconds) and (_perf_counter() - start) < max_seconds:
        inputs = make_inputs(j)
        sync()
        t0 = _perf_counter()
        fn(*inputs)
        sync()
        dt = _perf_counter() - t0
        times.append(dt * 1e3)
        total += dt
        j += 1
    return summarize(times)

"""Timing figures: a list of per-call times summarised as median and spread (``Timing``), the stopping rule's
precision test, and ``time_calls``, the simple per-call timer a backend calibrates its device with.

Both sides use it: the trusted side times a candidate's blocks (pipeline/blocks.py, pipeline/gpu_blocks.py) and
summarises its own times here; the backends time their calibration with ``time_calls``, and a GPU worker its
eagerly run blocks with this module's clock (worker/gpu_executor.py). The clock is captured when this module is
imported, before any candidate code is loaded in a worker.
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


#: The GPU timings' stopping rule (``gpu_blocks_done``): a timing may stop before ``min_seconds`` of device time
#: once its median's 95% confidence interval is within PRECISION of itself, with PRECISE_AFTER of ``min_seconds``
#: behind it; ``max_reps`` bounds it at CALL_BUDGET_BLOCK calls a repetition.
PRECISION = 0.005
PRECISE_AFTER = 0.1
CALL_BUDGET_BLOCK = 32


def gpu_blocks_done(times: list, total_s: float, elapsed_s: float, block: int, min_reps: int = 10,
                    max_reps: int = 200, min_seconds: float = 0.1, max_seconds: float = 4.0,
                    precision: float = PRECISION) -> bool:
    """Whether a GPU timing of blocks of ``block`` calls may stop: ``times`` per block so far, ``total_s`` of
    device time, ``elapsed_s`` of wall time. At least 5 blocks and ``min_reps`` calls; then ``min_seconds`` of
    device time, or a precise median (the floor is there because very short timings agreed with themselves while
    repeated timings disagreed); at most ``max_reps`` x CALL_BUDGET_BLOCK calls or ``max_seconds``."""
    min_blocks = max(5, -(-int(min_reps) // block))
    max_blocks = max(min_blocks, -(-int(max_reps) * CALL_BUDGET_BLOCK // block))
    if len(times) >= max_blocks or elapsed_s > max_seconds:
        return True
    precise = total_s >= PRECISE_AFTER * min_seconds and median_is_precise(times, precision)
    return len(times) >= min_blocks and (total_s >= min_seconds or precise)


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

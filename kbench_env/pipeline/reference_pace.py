"""The reference's own pace as the standard of the machine's state during a CPU pairing (paired.py).

Under load a pairing now and then runs through a stretch of seconds in which every call on the timed core costs
more, on both sides, by about the same added time rather than the same factor: the ratio is pulled towards 1 with a
narrow interval of its own, and a candidate slower than its reference gains from it. The reference is trusted code
timed while the candidate's worker is frozen, so its time a call is the machine's, not the candidate's doing: a
pairing whose reference ran far slower a call than in this evaluator's recent pairings of the same configuration
(DISTURBED times their median) is timed once more, and the pairing whose reference ran faster counts. The choice
looks only at the reference, so it cannot favour the candidate; a candidate that made the reference slow (it
cannot, frozen) would earn a second pairing and nothing else. A lasting change of the machine moves the recent
median within RECENT pairings, so it does not time everything twice.
"""

from __future__ import annotations

import statistics
import threading
import time
from collections import deque

#: A pairing's reference per-call time over the median of its configuration's recent ones past which it is timed
#: again: above what honest pairings' references spread to under load, below the slow stretches measured.
DISTURBED = 2.0
#: Recent pairings of a configuration whose reference times make its median.
RECENT = 8


class ReferencePace:
    """Per configuration key, the reference's per-call time (ms) in this evaluator's recent pairings."""

    def __init__(self):
        self._recent: dict = {}
        self._lock = threading.Lock()

    def disturbed(self, key, reference_ms: float) -> bool:
        """Whether a reference time of ``reference_ms`` a call is DISTURBED times past the recent median (never
        without a recent one)."""
        with self._lock:
            recent = self._recent.get(key)
            return bool(recent) and reference_ms > DISTURBED * statistics.median(recent)

    def record(self, key, reference_ms: float) -> None:
        with self._lock:
            self._recent.setdefault(key, deque(maxlen=RECENT)).append(reference_ms)


def paired_again_if_disturbed(time_once, pace: ReferencePace, key):
    """``time_once()`` (a PairedTiming), and once more if its reference ran disturbed (``pace``): the one whose
    reference ran faster a call, and the seconds the second pairing took (0 without one). The kept pairing's
    reference time is recorded."""
    pt = time_once()
    again = 0.0
    ref_ms = _reference_ms(pt)
    if ref_ms is not None and pace.disturbed(key, ref_ms):
        t0 = time.perf_counter()
        second = time_once()
        again = time.perf_counter() - t0
        second_ms = _reference_ms(second)
        if second.wrong is not None or (second_ms is not None and second_ms < ref_ms):
            pt, ref_ms = second, second_ms  # (a wrong output found in either pairing fails the candidate)
    if ref_ms is not None and pt.wrong is None:
        pace.record(key, ref_ms)
    return pt, again


def _reference_ms(pt) -> float | None:
    return pt.reference.median_ms if pt.wrong is None and pt.reference is not None else None

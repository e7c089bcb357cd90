"""Where a stopped worker runs when it is resumed for a timed block: its threads pinned to the cores the timing
chose, and (where this process may) given a higher scheduling priority than the machine's other work.

Paired timing on the CPU (pipeline/paired.py) places the reference's and the candidate's workers alike before each
of their blocks: the same cores, so that a core busier than another cannot favour one side (two workers left to
the scheduler can sit on different cores for seconds), and, when the trusted
side may raise priorities (root, or CAP_SYS_NICE), a nice value of ``BOOST``, so that a block takes its cores from
background jobs rather than sharing them. The worker, without capabilities, cannot raise its own priority further;
it can move its threads to other cores during its own block (sched_setaffinity), which only changes its side's
conditions: the next block places it again.
"""

from __future__ import annotations

import contextlib
import os
import threading

#: The nice value a timed block's threads get where this process may set it (-20 is the highest priority).
BOOST = -10


def timing_cores(threads: int) -> set[int]:
    """The cores a timed block runs on: the last ``threads`` of those this process may use."""
    allowed = sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else list(range(os.cpu_count() or 1))
    return set(allowed[-max(1, threads):])


def _threads(pid: int) -> list[int]:
    try:
        return [int(t) for t in os.listdir(f"/proc/{pid}/task")]
    except OSError:
        return []


class Placement:
    """Pins every thread of the processes ``pids`` to ``cores`` and, if allowed, boosts their priority;
    ``restore`` undoes both."""

    def __init__(self, cores: set[int], boost: bool = True):
        self.cores = set(cores)
        self.boost = boost and hasattr(os, "setpriority")
        self._boosted: set[int] = set()

    def apply(self, pids: list[int]) -> None:
        for pid in pids:
            for tid in _threads(pid):
                try:
                    os.sched_setaffinity(tid, self.cores)
                except OSError:
                    pass  # the thread ended
                if self.boost:
                    try:
                        os.setpriority(os.PRIO_PROCESS, tid, BOOST)
                        self._boosted.add(tid)
                    except PermissionError:
                        self.boost = False  # not allowed here: pinned only
                    except OSError:
                        pass

    @contextlib.contextmanager
    def boosted_here(self):
        """This thread (the one that runs the clock, writes the inputs and reads the outputs) at the timed blocks'
        priority while the block runs: under load its wake-up at a block's end is part of the block's time."""
        tid = threading.get_native_id()
        before = os.getpriority(os.PRIO_PROCESS, tid) if self.boost else None
        try:
            if before is not None:
                os.setpriority(os.PRIO_PROCESS, tid, BOOST)
        except OSError:
            before = None
        try:
            yield
        finally:
            if before is not None:
                os.setpriority(os.PRIO_PROCESS, tid, before)

    def restore(self, pids: list[int]) -> None:
        """The threads of ``pids`` back on every core this process may use, at the default priority."""
        allowed = os.sched_getaffinity(0)
        for pid in pids:
            for tid in _threads(pid):
                try:
                    os.sched_setaffinity(tid, allowed)
                    if tid in self._boosted:
                        os.setpriority(os.PRIO_PROCESS, tid, 0)
                except OSError:
                    pass
        self._boosted.clear()

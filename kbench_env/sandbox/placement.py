"""Where a stopped worker runs when it is resumed for a timed block: its threads pinned to the cores the timing
chose, and (where this process may) given a higher scheduling priority than the machine's other work.

Paired timing on the CPU (pipeline/paired.py) places the reference's and the candidate's workers alike before each
of their blocks: the same cores, so that a core busier than another cannot favour one side (two workers left to
the scheduler can sit on different cores for seconds), and, when the trusted
side may raise priorities (root, or CAP_SYS_NICE), a nice value of ``BOOST``, so that a block takes its cores from
background jobs rather than sharing them. The worker, without capabilities, cannot raise its own priority further;
it can move its threads to other cores during its own block (sched_setaffinity), which only changes its side's
conditions: the next block places it again. The trusted thread that runs the pairing's clock is on the same cores
for the pairing, real-time where allowed (``Placement.boosted_here``), and the workers' blocks are then real-time
too, below it.
"""

from __future__ import annotations

import contextlib
import os
import threading

#: The nice value a timed block's threads get where this process may set it (-20 is the highest priority).
BOOST = -10
#: The real-time priority of the thread that runs a pairing's clock (``boosted_here``): above the workers', above
#: every thread of the default policy and below the kernel's own real-time threads.
REALTIME_PRIORITY = 3
#: A timed block's worker threads real-time too wherever the clock thread is, below it (its timeout must always be
#: able to stop them), their children reset to the default policy: the timing core is the block's alone while it
#: runs, whatever else the machine runs. Deciding by a short look at the core's load as the pairing starts left an
#: idle machine's blocks at the nice value, open to whatever woke on the core later: the speedup spread wider there.
#: The worker's main thread (the one that takes the requests and makes the calls) is one step above its other
#: threads: real-time threads of one priority do not preempt each other, so a thread of the candidate's that never
#: blocks would otherwise keep the main thread off the core for good, and the block would only end at its timeout.
WORKERS_REALTIME = True
WORKER_PRIORITY = 1
WORKER_MAIN_PRIORITY = 2


def timing_cores(threads: int) -> set[int]:
    """The cores a timed block runs on: the last ``threads`` of those this process may use."""
    allowed = sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else list(range(os.cpu_count() or 1))
    return set(allowed[-max(1, threads):])


def _pin(tid: int, cores: set[int]) -> set[int] | None:
    """Thread ``tid`` on ``cores``: the cores it had, or None where that failed (it stays where it was)."""
    try:
        had = os.sched_getaffinity(tid)
        os.sched_setaffinity(tid, cores)
        return had
    except (OSError, AttributeError):
        return None


def _realtime(tid: int, priority: int | None = None) -> bool:
    """Thread ``tid`` at ``priority`` (REALTIME_PRIORITY by default) under SCHED_FIFO (threads and processes it
    starts at the default policy); False where this process may not (no root nor CAP_SYS_NICE, no real-time
    budget, another system)."""
    try:
        os.sched_setscheduler(tid, os.SCHED_FIFO | getattr(os, "SCHED_RESET_ON_FORK", 0),
                              os.sched_param(REALTIME_PRIORITY if priority is None else priority))
        return True
    except (OSError, AttributeError):
        return False


def threads_of(pid: int) -> list[int]:
    """The thread ids of process ``pid`` (none once it has gone)."""
    try:
        return [int(t) for t in os.listdir(f"/proc/{pid}/task")]
    except OSError:
        return []


def threads_main_first(pid: int) -> list[int]:
    """``threads_of(pid)`` with the main thread first (the threads it starts later inherit what is set on it), the
    main thread tried even where /proc lists none."""
    return [pid] + [t for t in threads_of(pid) if t != pid]


def set_each_thread(pid: int | None, setter) -> int:
    """``setter(tid)`` on every thread of process ``pid``, its main thread first (``threads_main_first``); how many
    were set (a thread that ended meanwhile raises OSError and is not; none without a process)."""
    done = 0
    for tid in threads_main_first(pid) if pid is not None else []:
        try:
            setter(tid)
            done += 1
        except OSError:  # the thread ended
            pass
    return done


class Placement:
    """Pins every thread of the processes ``pids`` to ``cores`` and, if allowed, boosts their priority;
    ``restore`` undoes both."""

    def __init__(self, cores: set[int], boost: bool = True):
        self.cores = set(cores)
        self.boost = boost and hasattr(os, "setpriority")
        self._boosted: set[int] = set()
        self.workers_rt = False  # (``boosted_here``: whether its clock thread is real-time)

    def apply(self, pids: list[int], main: int | None = None) -> None:
        """Every thread of ``pids`` on the timing cores at the block's priority; the main thread of process ``main``
        (the worker's own) one step above the rest where they are real-time (WORKER_MAIN_PRIORITY)."""
        for pid in pids:
            for tid in threads_of(pid):
                try:
                    os.sched_setaffinity(tid, self.cores)
                except OSError:
                    pass  # the thread ended
                priority = WORKER_MAIN_PRIORITY if tid == main else WORKER_PRIORITY
                if self.boost and self.workers_rt and _realtime(tid, priority):
                    self._boosted.add(tid)
                elif self.boost:
                    try:
                        os.setpriority(os.PRIO_PROCESS, tid, BOOST)
                        self._boosted.add(tid)
                    except PermissionError:
                        self.boost = False  # not allowed here: pinned only
                    except OSError:
                        pass

    @contextlib.contextmanager
    def boosted_here(self):
        """This thread (the one that runs the clock, writes the inputs and reads the outputs) on the timed blocks'
        cores and ahead of the machine's other work while the pairing runs: real-time (SCHED_FIFO at the lowest
        real-time priority, its children reset to the default) where this process may, else at the blocks' nice
        value. Left to the scheduler it stays on one core or another for a whole pairing, and a block's hand-over
        between it and a worker costs differently on the workers' core and off it: a fixed cost per block that
        moved the speedup from one evaluation to the next. On the workers' core at a nice value it waited behind
        the machine's other work for its wake-up at a block's end, inside the block's time; real-time, it does
        not (the freeze's wait sleeps rather than yields, so the stopping worker on its core can run: memory.py).
        The workers it waits for are frozen whenever it runs, so the core is the timing's alone meanwhile; where it
        is real-time, the workers' blocks are real-time too, below it (``apply``)."""
        tid = threading.get_native_id()
        had = _pin(tid, self.cores)
        rt = self.boost and _realtime(tid)
        # (only below a real-time clock thread: a real-time worker that never blocks would keep a lesser one out)
        self.workers_rt = rt and WORKERS_REALTIME
        before = None
        if self.boost and not rt:
            try:
                before = os.getpriority(os.PRIO_PROCESS, tid)
                os.setpriority(os.PRIO_PROCESS, tid, BOOST)
            except OSError:
                before = None
        try:
            yield
        finally:
            if rt:
                os.sched_setscheduler(tid, os.SCHED_OTHER, os.sched_param(0))
            if before is not None:
                os.setpriority(os.PRIO_PROCESS, tid, before)
            if had is not None:
                _pin(tid, had)

    def restore(self, pids: list[int]) -> None:
        """The threads of ``pids`` back on every core this process may use, at the default priority."""
        allowed = os.sched_getaffinity(0)
        for pid in pids:
            for tid in threads_of(pid):
                try:
                    os.sched_setaffinity(tid, allowed)
                    if tid in self._boosted:
                        os.sched_setscheduler(tid, os.SCHED_OTHER, os.sched_param(0))
                        os.setpriority(os.PRIO_PROCESS, tid, 0)
                except OSError:
                    pass
        self._boosted.clear()

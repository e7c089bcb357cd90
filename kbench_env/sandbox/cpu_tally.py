"""What the workers cost the host in CPU time, by role and by stage: the figure that says which part of a worker's
life to make cheaper when the host's cores bound a batch (bench/rl_batch.py reports it per pass).

A worker's whole CPU time is read here from /proc just before it is killed (``Worker.close``: its process, every
thread, the children it waited for). The stages come from the worker itself (``LOADED``'s ``cpu_seconds``: its
process CPU time when its warm-up ended and when its candidate had loaded), so they are the candidate's word: a
measurement of where time goes, never an input to a reward; a figure that does not fit inside the whole (negative,
past the total) is counted as missing. What the kernel spends tearing the process down after the kill (on a GPU,
its CUDA context's memory unmapped) comes after the read and is in no figure here: where the workers' cgroup counts
their CPU time too (bench/rl_batch.py's cgroup row), the difference is mostly that.

Roles: ``candidate`` (a worker that ran a candidate, a spare's included), ``reference`` (a task's reference program:
no builder), ``spare_unused`` (a spare that left, or was closed, before it got a candidate: its start was spent for
nothing). Stages: ``start`` (the fork from the server, the confinement and the warm-up: on a GPU CUDA's context and
the audit's profiler), ``load`` (the candidate's builds requested and loaded), ``serve`` (every request after:
checks, the audit, timed blocks).
"""

from __future__ import annotations

import os
import threading
from collections import defaultdict

from kbench_env.sandbox.confine.proc_table import stat_fields

ROLES = ("candidate", "reference", "spare_unused")
STAGES = ("start", "load", "serve")
_TICK = os.sysconf("SC_CLK_TCK")


def process_cpu_seconds(pid: int | None) -> float | None:
    """User and system CPU-seconds of process ``pid`` and of the children it has waited for (/proc/<pid>/stat);
    None where it cannot be read (gone, another namespace's)."""
    if pid is None:
        return None
    try:  # (stat's utime 14, stime 15, cutime 16, cstime 17: indices 11-14 from the state, field 3)
        return sum(int(v) for v in stat_fields(f"/proc/{pid}/stat")[11:15]) / _TICK
    except (OSError, ValueError, IndexError):
        return None


def _stages(total: float, marks) -> dict | None:
    """``{stage: seconds}`` from a worker's reported marks and its measured total, or None where they do not fit."""
    try:
        warm, loaded = float(marks["warm_up"]), float(marks["loaded"])
    except (TypeError, KeyError, ValueError):
        return None
    if not 0.0 <= warm <= loaded <= total + 2.0 / _TICK:  # (the total is read in clock ticks)
        return None
    return {"start": warm, "load": loaded - warm, "serve": max(0.0, total - loaded)}


class CpuTally:
    """Sums of the workers' CPU-seconds since this process started, by role (thread-safe)."""

    def __init__(self):
        self._lock = threading.Lock()
        self._sums: dict = defaultdict(float)

    def record(self, role: str, total: float | None, marks=None) -> None:
        """One worker's life: its ``role`` (ROLES), its whole CPU time (None: not read) and its reported marks."""
        if role not in ROLES:
            raise ValueError(f"unknown worker role {role!r}")
        stages = None if total is None else _stages(total, marks)
        with self._lock:
            self._sums[(role, "workers")] += 1
            if total is None:
                return
            self._sums[(role, "measured")] += 1
            self._sums[(role, "total")] += total
            if stages is not None:
                self._sums[(role, "staged")] += 1
                for stage, seconds in stages.items():
                    self._sums[(role, stage)] += seconds

    def snapshot(self) -> dict:
        """``{role: {"workers", "measured", "total", "staged", "start", "load", "serve"}}``: counts and CPU-seconds
        so far (subtract two snapshots for a span's)."""
        with self._lock:
            sums = dict(self._sums)
        keys = ("workers", "measured", "total", "staged") + STAGES
        return {role: {k: sums.get((role, k), 0.0) for k in keys} for role in ROLES}


#: This process's tally: every sandbox.Worker records itself here when it closes.
TALLY = CpuTally()


def since(before: dict, after: dict) -> dict:
    """The tally of the span between two snapshots."""
    return {role: {k: after[role][k] - before[role][k] for k in after[role]} for role in after}

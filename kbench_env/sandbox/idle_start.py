"""A spare worker started at the idle scheduling class, and put back at the default one when a candidate takes it.

A spare starts ahead of the candidate it will serve (spares.py): its start (the confinement; on a GPU, CUDA's
context and the forward audit's profiler: CPU-seconds) is on nobody's critical path until then, yet at the default
policy it takes the cores from the builds (niced: builder/server.BUILD_NICE), which on a host whose cores bound a
trainer's step are that step's critical path. At SCHED_IDLE it runs only on cores nothing else wants: between
builds, in the step's tail, between steps. When ``take`` hands it a candidate, each of its threads goes back to the
default policy, so the candidate's load, checks and timings run as in any worker.

Only where this process may take a thread out of SCHED_IDLE again (CAP_SYS_NICE: root has it unless a container
dropped it); elsewhere a spare starts at the default policy, as a worker started for a candidate does.
``KBENCH_SPARE_IDLE_START=0`` turns it off.
"""

from __future__ import annotations

import os

from kbench_env.config import environ
from kbench_env.sandbox.placement import set_each_thread

_CAP_SYS_NICE = 23


def may_raise() -> bool:
    """Whether this process holds CAP_SYS_NICE (/proc/self/status's effective set), which taking a thread out of
    SCHED_IDLE needs."""
    try:
        with open("/proc/self/status") as f:
            line = next(x for x in f if x.startswith("CapEff:"))
        return bool(int(line.split()[1], 16) >> _CAP_SYS_NICE & 1)
    except (OSError, StopIteration, ValueError, IndexError):
        return False


def enabled() -> bool:
    """Whether spares start at the idle class here: the setting on, the class known, and a way back (``may_raise``)."""
    return environ.get("KBENCH_SPARE_IDLE_START") and hasattr(os, "SCHED_IDLE") and may_raise()


def _set_all(pid: int | None, policy: int) -> int:
    """Every thread of process ``pid`` at ``policy``, its main thread first; how many were set."""
    return set_each_thread(pid, lambda tid: os.sched_setscheduler(tid, policy, os.sched_param(0)))


def lower(pid: int | None) -> int:
    """Every thread of process ``pid`` at SCHED_IDLE (the threads it starts after inherit the class); how many."""
    return _set_all(pid, os.SCHED_IDLE)


def restore(pid: int | None) -> int:
    """Every thread of process ``pid`` back at the default policy (SCHED_OTHER), listed twice, so that one an idle
    thread started while the first pass ran is raised too; how many were set in the last pass."""
    _set_all(pid, os.SCHED_OTHER)
    return _set_all(pid, os.SCHED_OTHER)
